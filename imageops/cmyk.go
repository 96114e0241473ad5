package imageops

// cmykToHWC converts libjpeg's raw 4-component output to c channels. Files
// with an Adobe APP14 segment store inverted inks (255 = no ink), as
// Photoshop writes them; PIL reads them the same way ("CMYK;I").
func cmykToHWC(src, dst []byte, c int, adobeInverted bool) {
	n := len(src) / 4
	for i := 0; i < n; i++ {
		s := src[4*i : 4*i+4]
		cc, m, y, k := s[0], s[1], s[2], s[3]
		if adobeInverted {
			cc, m, y, k = 255-cc, 255-m, 255-y, 255-k
		}
		r, g, b := inkToRGB(cc, m, y, k)
		put(dst[i*c:], c, r, g, b, 255)
	}
}
