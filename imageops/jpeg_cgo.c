//go:build cgo && !piperun_purego

// The libjpeg side of the cgo decoders. It lives in a .c file rather than
// in a cgo preamble so that decode_libjpeg.go and decode_window.go share one
// error manager and one decompressor pool; the build constraint keeps it out
// of pure-Go builds, which refuse C files.

#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include "jpeg_cgo.h"
#include "resize_cgo.h"

// pr_max_scans bounds the scans of a multi-scan (progressive) file, as
// TurboJPEG's TJFLAG_LIMITSCANS did: each scan re-reads the whole
// coefficient buffer, so a small file of thousands of tiny scans would
// otherwise take minutes.
#define pr_max_scans 500

struct pr_err {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	int strict;
	int warned;
	char msg[JMSG_LENGTH_MAX];
};

struct pr_dec {
	struct jpeg_decompress_struct cinfo;
	struct pr_err err;
	struct jpeg_progress_mgr progress;
};

// pr_error_exit replaces libjpeg's exit(): keep the message and unwind to
// the setjmp of the running call.
static void pr_error_exit(j_common_ptr c) {
	struct pr_err *e = (struct pr_err *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

// pr_emit turns warnings (corrupt data, premature end) into errors in
// strict mode; level >= 0 are trace messages and are dropped. The first
// warning's text is kept, as libjpeg's own emit_message would print it.
static void pr_emit(j_common_ptr c, int level) {
	struct pr_err *e = (struct pr_err *)c->err;
	if (level >= 0) return;
	if (!e->warned) (*c->err->format_message)(c, e->msg);
	e->warned = 1;
	if (e->strict) longjmp(e->jb, 1);
}

// pr_silent stops libjpeg printing to stderr.
static void pr_silent(j_common_ptr c) { (void)c; }

// pr_progress enforces pr_max_scans; libjpeg calls it as it consumes input.
static void pr_progress(j_common_ptr c) {
	j_decompress_ptr d = (j_decompress_ptr)c;
	struct pr_err *e = (struct pr_err *)c->err;
	if (d->input_scan_number > pr_max_scans) {
		snprintf(e->msg, sizeof e->msg, "Progressive JPEG image has more than %d scans", pr_max_scans);
		longjmp(e->jb, 1);
	}
}

// pr_fail ends the running call with msg.
static void pr_fail(pr_dec *d, const char *msg) {
	snprintf(d->err.msg, sizeof d->err.msg, "%s", msg);
	longjmp(d->err.jb, 1);
}

// pr_create makes d's libjpeg object; it is apart from pr_dec_new so that no
// local variable is live across the setjmp.
static int pr_create(pr_dec *d) {
	d->cinfo.err = jpeg_std_error(&d->err.pub);
	d->err.pub.error_exit = pr_error_exit;
	d->err.pub.emit_message = pr_emit;
	d->err.pub.output_message = pr_silent;
	d->progress.progress_monitor = pr_progress;
	if (setjmp(d->err.jb)) {
		// jpeg_create_decompress fails only on out-of-memory or a library
		// version mismatch; destroy is a no-op where nothing was made.
		jpeg_destroy_decompress(&d->cinfo);
		return -1;
	}
	jpeg_create_decompress(&d->cinfo);
	return 0;
}

pr_dec *pr_dec_new(void) {
	pr_dec *d = calloc(1, sizeof *d);
	if (d != NULL && pr_create(d) != 0) {
		free(d);
		d = NULL;
	}
	return d;
}

void pr_dec_free(pr_dec *d) {
	jpeg_destroy_decompress(&d->cinfo);
	free(d);
}

const char *pr_dec_msg(pr_dec *d) { return d->err.msg; }

// pr_begin readies d for a call. jpeg_create_decompress zeroes the struct,
// so the progress manager is attached here rather than in pr_dec_new.
static void pr_begin(pr_dec *d, int strict) {
	d->err.strict = strict;
	d->err.warned = 0;
	d->err.msg[0] = 0;
	d->cinfo.progress = &d->progress;
}

// pr_end returns d to its idle state whether or not the call succeeded:
// jpeg_abort_decompress frees the per-image memory but keeps the object
// for the next call, and the source is pointed away from the caller's
// buffer, which is Go memory that libjpeg must not hold on to.
static void pr_end(pr_dec *d) {
	jpeg_abort_decompress(&d->cinfo);
	if (d->cinfo.src != NULL) {
		d->cinfo.src->next_input_byte = NULL;
		d->cinfo.src->bytes_in_buffer = 0;
	}
}

// pr_setup reads the header of buf and sets the output parameters: color
// space, scale num/8, and the accurate integer IDCT with fancy upsampling
// (djpeg's defaults). It checks the output size libjpeg will produce
// against the caller's, which sized its buffers from its own header parse.
static void pr_setup(pr_dec *d, const unsigned char *buf, unsigned long size, int num,
		int color, int comps, int width, int height) {
	j_decompress_ptr c = &d->cinfo;
	jpeg_mem_src(c, buf, size);
	jpeg_read_header(c, TRUE);
	c->out_color_space = color;
	c->scale_num = num;
	c->scale_denom = 8;
	c->dct_method = JDCT_ISLOW;
	c->do_fancy_upsampling = TRUE;
	jpeg_calc_output_dimensions(c);
	if (c->output_width != (JDIMENSION)width || c->output_height != (JDIMENSION)height ||
			c->out_color_components != comps) {
		snprintf(d->err.msg, sizeof d->err.msg,
			"libjpeg reads a %ux%ux%d image where the header gives %dx%dx%d",
			(unsigned)c->output_width, (unsigned)c->output_height, c->out_color_components,
			width, height, comps);
		longjmp(d->err.jb, 1);
	}
}

// pr_decode decodes the whole image scaled by num/8 into out (height rows
// of width*comps bytes). Returns 0, or -1 with pr_dec_msg set.
int pr_decode(pr_dec *d, const unsigned char *buf, unsigned long size, int num,
		int color, int comps, int width, int height, unsigned char *out, int strict) {
	j_decompress_ptr c = &d->cinfo;
	pr_begin(d, strict);
	if (setjmp(d->err.jb)) {
		pr_end(d);
		return -1;
	}
	pr_setup(d, buf, size, num, color, comps, width, height);
	jpeg_start_decompress(c);
	size_t stride = (size_t)width * comps;
	// libjpeg returns at most one row group (1 to 4 rows) per call, so a
	// short array of row pointers does what TurboJPEG's full array did.
	JSAMPROW rows[16];
	while (c->output_scanline < c->output_height) {
		JDIMENSION y = c->output_scanline, n = c->output_height - y;
		if (n > 16) n = 16;
		for (JDIMENSION i = 0; i < n; i++) rows[i] = out + (size_t)(y + i) * stride;
		jpeg_read_scanlines(c, rows, n);
	}
	// Read to the end-of-image marker, as TurboJPEG did: damage after
	// the last row (or a missing EOI) is still reported.
	jpeg_finish_decompress(c);
	pr_end(d);
	return 0;
}

// pr_decode_hpass3 is pr_decode of an RGB image followed by the packed
// horizontal pass of the resize (pr_hpass3packed) to ow pixels a row:
// libjpeg's rows go into strip (16 rows of width*3 bytes), and each group
// is resampled into out (height rows of ow*3 bytes) as it comes. The pass
// works row by row, so out is exactly what the pass gives on the whole
// frame, but the frame itself (up to 3 MB for a 1120x896 photo, per
// decoder) is never held. Returns 0, or -1 with pr_dec_msg set.
int pr_decode_hpass3(pr_dec *d, const unsigned char *buf, unsigned long size, int num,
		int width, int height, unsigned char *strip, unsigned char *out, int ow,
		const int32_t *start, const int32_t *count, const uint64_t *w13, int stride,
		const int16_t *w16, int groups, uint64_t *exp, int strict) {
	j_decompress_ptr c = &d->cinfo;
	pr_begin(d, strict);
	if (setjmp(d->err.jb)) {
		pr_end(d);
		return -1;
	}
	pr_setup(d, buf, size, num, JCS_EXT_RGB, 3, width, height);
	jpeg_start_decompress(c);
	size_t in = (size_t)width * 3;
	JSAMPROW rows[16];
	while (c->output_scanline < c->output_height) {
		JDIMENSION y = c->output_scanline, n = 0;
		while (n < 16 && c->output_scanline < c->output_height) {
			JDIMENSION want = 16 - n;
			for (JDIMENSION i = 0; i < want; i++) rows[i] = strip + (size_t)(n + i) * in;
			JDIMENSION got = jpeg_read_scanlines(c, rows, want);
			if (got == 0) {
				snprintf(d->err.msg, sizeof d->err.msg, "libjpeg returned no rows at row %u of %u",
					(unsigned)c->output_scanline, (unsigned)c->output_height);
				longjmp(d->err.jb, 1);
			}
			n += got;
		}
		pr_hpass3packed(strip, (int)n, width, out + (size_t)y * ow * 3, ow,
			start, count, w13, stride, w16, groups, exp);
	}
	jpeg_finish_decompress(c);
	pr_end(d);
	return 0;
}

// pr_decode_window decodes rows y..y+h-1, columns x..x+w-1 of the image
// scaled by num/8 into out (w*comps bytes per row). jpeg_crop_scanline
// skips the IDCT and colour conversion of iMCU columns left and right of
// the window, jpeg_skip_scanlines those of the rows above it and, when
// strict, below it; lenient, rows below are never read. width and height
// are the scaled image's size; rowbuf must hold one of its rows. Returns
// 0, or -1 with pr_dec_msg set.
int pr_decode_window(pr_dec *d, const unsigned char *buf, unsigned long size, int num,
		int color, int comps, int width, int height, int y, int x, int h, int w,
		unsigned char *out, unsigned char *rowbuf, int strict) {
	j_decompress_ptr c = &d->cinfo;
	pr_begin(d, strict);
	if (setjmp(d->err.jb)) {
		pr_end(d);
		return -1;
	}
	pr_setup(d, buf, size, num, color, comps, width, height);
	jpeg_start_decompress(c);
	// Ask for one more column on each side: a column at the edge of
	// libjpeg's crop is upsampled with a replicated neighbour, which a full
	// decode would not do, so the window's own edge columns need context.
	int x0 = x > 0 ? x - 1 : 0;
	int x1 = (JDIMENSION)(x + w + 1) < c->output_width ? x + w + 1 : (int)c->output_width;
	// And at least 3 columns of every colour plane: libjpeg-turbo
	// upsamples a plane 2 columns wide or less with its plain upsampler,
	// not the fancy one a full decode uses (a 1-column window at x 0 of a
	// 4:2:0 file differed by up to 2 levels; found in review).
	const int minw = 3 * c->max_h_samp_factor;
	if (x1 - x0 < minw) {
		x1 = x0 + minw < (int)c->output_width ? x0 + minw : (int)c->output_width;
		x0 = x1 - minw > 0 ? x1 - minw : 0;
	}
	JDIMENSION xoff = x0, cw = x1 - x0;
	if (x0 > 0 || (JDIMENSION)x1 < c->output_width)
		jpeg_crop_scanline(c, &xoff, &cw);
	int skipx = x - (int)xoff;
	if (y > 0 && jpeg_skip_scanlines(c, y) != (JDIMENSION)y)
		pr_fail(d, "cannot skip to the crop window");
	// Each row goes straight into out at the start of its own slot when
	// the cropped scanline (wider than the window by up to an iMCU, the
	// context columns and, for a narrow window, the colour planes' least
	// width) fits between there and the end of out (all but the last few
	// rows of a window wider than an iMCU or two; every row of a narrow,
	// short one), and is then moved left by skipx: moving bytes just
	// written costs less than copying them from a row buffer into memory
	// not yet in cache.
	const size_t wb = (size_t)w * comps, cb = (size_t)cw * comps, sb = (size_t)skipx * comps;
	const size_t total = (size_t)h * wb;
	for (int row = 0; row < h; row++) {
		unsigned char *dst = out + (size_t)row * wb;
		JSAMPROW rp = (size_t)row * wb + cb <= total ? dst : rowbuf;
		if (jpeg_read_scanlines(c, &rp, 1) != 1)
			pr_fail(d, "image data ends before the crop window");
		if (rp != dst || sb != 0)
			memmove(dst, rp + sb, wb);
	}
	if (strict) {
		// Entropy-decode the rows below the window too and read to the
		// end-of-image marker, so damage there is refused as a full decode
		// refuses it: whether a file counts as damaged must not depend on
		// the crop a seed draws (found by a tester: a random_resized_crop
		// kept a file that resize skipped). jpeg_skip_scanlines decodes
		// the Huffman data of the rows it skips but none of their IDCT or
		// colour conversion, except that a skip to the very end decodes
		// nothing, so it stops one row short and reads that row.
		// Progressive files were read whole by jpeg_start_decompress.
		JDIMENSION left = c->output_height - c->output_scanline;
		if (left > 1 && jpeg_skip_scanlines(c, left - 1) != left - 1)
			pr_fail(d, "cannot skip past the crop window");
		if (left > 0 && jpeg_read_scanlines(c, &rowbuf, 1) != 1)
			pr_fail(d, "image data ends before its last row");
		jpeg_finish_decompress(c);
	}
	pr_end(d);
	return 0;
}
