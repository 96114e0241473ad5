//go:build cgo && !piperun_purego

package imageops

/*
#cgo LDFLAGS: -ljpeg
#include <stdio.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>

struct pr_err {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	int strict;
	int warned;
	char msg[JMSG_LENGTH_MAX];
};

static void pr_error_exit(j_common_ptr c) {
	struct pr_err *e = (struct pr_err *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

static void pr_emit(j_common_ptr c, int level) {
	struct pr_err *e = (struct pr_err *)c->err;
	if (level >= 0) return;
	if (!e->warned) (*c->err->format_message)(c, e->msg);
	e->warned = 1;
	if (e->strict) longjmp(e->jb, 1);
}

static void pr_silent(j_common_ptr c) { (void)c; }

// pr_decode_window decodes rows y..y+h-1, columns x..x+w-1 of the image
// scaled by num/8 into out (w*comps bytes per row). jpeg_crop_scanline
// skips the IDCT and colour conversion of iMCU columns left and right of
// the window, jpeg_skip_scanlines those of the rows above it, and rows below
// are never read. rowbuf must hold a full scaled row. Returns 0, or -1 with
// msg set; *warned reports whether libjpeg warned.
static int pr_decode_window(const unsigned char *buf, unsigned long size, int num,
		int color, int comps, int y, int x, int h, int w,
		unsigned char *out, unsigned char *rowbuf, int strict, char *msg, int *warned) {
	struct jpeg_decompress_struct cinfo;
	struct pr_err jerr;
	memset(&cinfo, 0, sizeof(cinfo));
	cinfo.err = jpeg_std_error(&jerr.pub);
	jerr.pub.error_exit = pr_error_exit;
	jerr.pub.emit_message = pr_emit;
	jerr.pub.output_message = pr_silent;
	jerr.strict = strict;
	jerr.warned = 0;
	jerr.msg[0] = 0;
	if (setjmp(jerr.jb)) {
		strncpy(msg, jerr.msg, JMSG_LENGTH_MAX);
		*warned = jerr.warned;
		jpeg_destroy_decompress(&cinfo);
		return -1;
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, buf, size);
	jpeg_read_header(&cinfo, TRUE);
	cinfo.out_color_space = color;
	cinfo.scale_num = num;
	cinfo.scale_denom = 8;
	cinfo.dct_method = JDCT_ISLOW;
	jpeg_start_decompress(&cinfo);
	// Ask for one more column on each side: a column at the edge of
	// libjpeg's crop is upsampled with a replicated neighbour, which a full
	// decode would not do, so the window's own edge columns need context.
	int x0 = x > 0 ? x - 1 : 0;
	int x1 = (JDIMENSION)(x + w + 1) < cinfo.output_width ? x + w + 1 : (int)cinfo.output_width;
	JDIMENSION xoff = x0, cw = x1 - x0;
	if (x0 > 0 || (JDIMENSION)x1 < cinfo.output_width)
		jpeg_crop_scanline(&cinfo, &xoff, &cw);
	int skipx = x - (int)xoff;
	if (y > 0 && jpeg_skip_scanlines(&cinfo, y) != (JDIMENSION)y) {
		strcpy(msg, "cannot skip to the crop window");
		jpeg_destroy_decompress(&cinfo);
		return -1;
	}
	for (int row = 0; row < h; row++) {
		JSAMPROW rp = rowbuf;
		if (jpeg_read_scanlines(&cinfo, &rp, 1) != 1) {
			strcpy(msg, "image data ends before the crop window");
			jpeg_destroy_decompress(&cinfo);
			return -1;
		}
		memcpy(out + (size_t)row * w * comps, rowbuf + (size_t)skipx * comps, (size_t)w * comps);
	}
	*warned = jerr.warned;
	if (jerr.warned) strncpy(msg, jerr.msg, JMSG_LENGTH_MAX);
	jpeg_abort_decompress(&cinfo);
	jpeg_destroy_decompress(&cinfo);
	return 0;
}
*/
import "C"

import (
	"unsafe"
)

// windowJPEG decodes only window r of the stored image scaled by num/8,
// through libjpeg's partial-decode API (the TurboJPEG 2.x API cannot crop).
// Rows below the window are never entropy-decoded, so damage there goes
// unnoticed; damage inside or above is reported as by turboJPEG.
var windowJPEG windowDecoder = func(data []byte, info *jpegInfo, ch, num int, r Rect, alloc func(int) []byte, lenient bool) ([]byte, error) {
	var color C.int
	switch ch {
	case 1:
		color = C.JCS_GRAYSCALE
	case 3:
		color = C.JCS_RGB
	default:
		color = C.JCS_EXT_RGBA
	}
	sw := scaled(info.width, num)
	rowbuf := defaultPool.Get(sw * ch)
	defer defaultPool.Put(rowbuf)
	out := alloc(r.H * r.W * ch)
	var msg [C.JMSG_LENGTH_MAX]C.char
	var warned C.int
	strict := C.int(1)
	if lenient {
		strict = 0
	}
	rc := C.pr_decode_window((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.int(num),
		color, C.int(ch), C.int(r.Y), C.int(r.X), C.int(r.H), C.int(r.W),
		(*C.uchar)(unsafe.Pointer(&out[0])), (*C.uchar)(unsafe.Pointer(&rowbuf[0])), strict, &msg[0], &warned)
	if rc != 0 {
		return nil, turboError(C.GoString(&msg[0]))
	}
	return out, nil
}
