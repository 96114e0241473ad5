#!/usr/bin/env python3
"""One core's libjpeg-turbo decode+resize rate as a Python user gets it.

PIL (Debian's python3-pil links libjpeg62-turbo) decodes each photo and
resizes it to 224x224 bilinear, in one process on one core, with the JPEG
bytes already in memory: the reference the W1 target names ("libjpeg-turbo
decodes and resizes about 340 images/s per core"). --draft lets libjpeg
shrink in the DCT domain to twice the target first, as piperun's fused
decode does. One warm-up pass, then PASSES timed passes; prints JSON.
"""
import argparse
import io
import json
import os
import time

from PIL import Image, features


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--draft", action="store_true")
    a = ap.parse_args()
    paths = sorted(os.path.join(a.photos, f) for f in os.listdir(a.photos) if f.lower().endswith((".jpg", ".jpeg")))
    data = [open(p, "rb").read() for p in paths]

    def one_pass():
        for d in data:
            im = Image.open(io.BytesIO(d))
            if a.draft:
                im.draft("RGB", (448, 448))
            im.convert("RGB").resize((224, 224), Image.BILINEAR)

    one_pass()
    t = time.perf_counter()
    for _ in range(a.passes):
        one_pass()
    dt = time.perf_counter() - t
    n = len(data) * a.passes
    print(json.dumps({"images": n, "elapsed_s": dt, "images_per_s": n / dt, "draft": a.draft,
                      "libjpeg_turbo": bool(features.check_feature("libjpeg_turbo"))}))


if __name__ == "__main__":
    main()
