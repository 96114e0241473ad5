"""Writes color_golden.json: torchvision's colour and geometry functions on
small synthetic images, the reference for imageops' TestColorMatchesTorchvision.

Run from the repository root with Debian's python3-torchvision:
    /usr/bin/python3 imageops/testdata/color_golden.py > imageops/testdata/color_golden.json
"""
import json

import numpy as np
import torch
import torchvision
import torchvision.transforms.functional as F

H, W = 5, 7


def image(dtype, c):
    """Level i of the HWC image is (i*37 + 11) % 256; float32 divides by 255."""
    lv = ((np.arange(H * W * c) * 37 + 11) % 256).reshape(H, W, c)
    if dtype == "uint8":
        return lv.astype(np.uint8)
    return (lv.astype(np.float32) / np.float32(255)).astype(np.float32)


def chw(a):
    return torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1)


def hwc(t):
    return t.permute(1, 2, 0).contiguous().numpy()


cases = []
for dtype in ("uint8", "float32"):
    for c in (1, 3):
        img = image(dtype, c)
        for op, fn, args in [
            ("adjust_brightness", F.adjust_brightness, [0.0, 0.5, 1.37, 2.0]),
            ("adjust_contrast", F.adjust_contrast, [0.0, 0.5, 1.8]),
            ("adjust_saturation", F.adjust_saturation, [0.0, 0.3, 1.6]),
        ]:
            for f in args:
                out = hwc(fn(chw(img), f))
                cases.append({"op": op, "dtype": dtype, "channels": c, "arg": f, "shape": list(out.shape), "out": out.ravel().tolist()})
        if c == 3:
            for n in (1, 3):
                out = hwc(F.rgb_to_grayscale(chw(img), num_output_channels=n))
                cases.append({"op": "grayscale", "dtype": dtype, "channels": c, "arg": n, "shape": list(out.shape), "out": out.ravel().tolist()})
        out = hwc(F.vflip(chw(img)))
        cases.append({"op": "flip_up_down", "dtype": dtype, "channels": c, "arg": 0, "shape": list(out.shape), "out": out.ravel().tolist()})
        for k in (-1, 0, 1, 2, 3, 5):
            out = np.rot90(img, k, axes=(0, 1))
            cases.append({"op": "rot90", "dtype": dtype, "channels": c, "arg": k, "shape": list(out.shape), "out": np.ascontiguousarray(out).ravel().tolist()})

print(json.dumps({"torch": torch.__version__, "torchvision": torchvision.__version__, "height": H, "width": W, "cases": cases}, separators=(",", ":")))
