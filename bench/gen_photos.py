#!/usr/bin/env python3
"""Writes a folder of ImageNet-like JPEGs made from scikit-image's bundled
sample photographs, for running the W1 benchmarks where the shared ImageNet
sample may not go (its licence keeps it out of copies of this project, and
a lent GPU machine sees only the project): random crops of 40-100 % of a
photo's sides, resized to ImageNet's typical 500x375 or 375x500, saved at
quality 95 with 4:2:0 chroma. They hold less detail than ImageNet's (about
65 KB a photo against 110), so they decode somewhat faster: compare rates
on them with rates on them, not with the ImageNet figures.

    gen_photos.py OUT_DIR [--count N] [--seed S]
"""
import argparse
import os
import random

import numpy as np
from PIL import Image
from skimage import data

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "retina", "immunohistochemistry"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    sources = []
    for name in PHOTOS:
        try:
            im = np.asarray(getattr(data, name)())
        except Exception as e:  # some versions fetch a few over the network
            print(f"skipping {name}: {e}")
            continue
        if im.ndim == 3 and im.shape[2] >= 3:
            sources.append((name, Image.fromarray(im[:, :, :3])))
    if not sources:
        raise SystemExit("no scikit-image sample photographs available")
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for i in range(a.count):
        name, im = sources[i % len(sources)]
        w, h = im.size
        cw, ch = int(w * rng.uniform(0.4, 1)), int(h * rng.uniform(0.4, 1))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        size = (500, 375) if rng.random() < 0.75 else (375, 500)
        crop = im.crop((x, y, x + cw, y + ch)).resize(size, Image.BICUBIC)
        if rng.random() < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        crop.save(os.path.join(a.out, f"{name}_{i:05d}.JPEG"), quality=95, subsampling=2)
    print(f"{a.count} photos from {', '.join(n for n, _ in sources)} in {a.out}")


if __name__ == "__main__":
    main()
