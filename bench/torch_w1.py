#!/usr/bin/env python3
"""PyTorch peer for piperun's image benchmarks.

Runs a DataLoader(num_workers=2, batch_size=32, shuffle=True) over a flat
folder of JPEGs (label = index of the file in sorted order), decoding with
PIL: open -> convert("RGB") -> resize((224, 224), BILINEAR) -> float tensor
/255 (torchvision's ToTensor, CHW). With --augment it applies torchvision's
RandomResizedCrop(224) + RandomHorizontalFlip() instead of the resize; with
--jitter, those, ColorJitter(0.4, 0.4, 0.4) and ImageNet's Normalize.
Prints one JSON object with images/s.

Debian: apt-get install python3-torch python3-torchvision python3-pil
(run with /usr/bin/python3, the interpreter those packages install into).
"""
import argparse
import json
import os
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


class Folder(Dataset):
    def __init__(self, root, augment, jitter=False):
        exts = (".jpg", ".jpeg", ".png")
        self.paths = sorted(
            os.path.join(root, f) for f in os.listdir(root) if f.lower().endswith(exts)
        )
        if not self.paths:
            raise SystemExit(f"no images in {root}")
        if jitter:
            self.tf = transforms.Compose([
                transforms.RandomResizedCrop(224),
                transforms.RandomHorizontalFlip(),
                transforms.ColorJitter(0.4, 0.4, 0.4),
                transforms.ToTensor(),
                transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ])
        elif augment:
            self.tf = transforms.Compose([
                transforms.RandomResizedCrop(224),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
            ])
        else:
            self.tf = transforms.Compose([
                transforms.Resize((224, 224), interpolation=transforms.InterpolationMode.BILINEAR),
                transforms.ToTensor(),
            ])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as im:
            img = im.convert("RGB")
        return self.tf(img), i


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default="/work/shared/data/photos/imagenet")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--augment", action="store_true")
    ap.add_argument("--jitter", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(1)
    ds = Folder(args.dir, args.augment, args.jitter)
    dl = DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                    persistent_workers=args.workers > 0)
    images = 0
    checksum = 0.0
    start = time.perf_counter()
    for _ in range(args.epochs):
        for x, y in dl:
            images += x.shape[0]
            checksum += float(x[:, :, 0, 0].sum())  # touch the batch
    elapsed = time.perf_counter() - start
    print(json.dumps({
        "peer": "torch",
        "augment": args.augment,
        "jitter": args.jitter,
        "workers": args.workers,
        "batch_size": args.batch,
        "epochs": args.epochs,
        "images": images,
        "elapsed_s": round(elapsed, 3),
        "images_per_s": round(images / elapsed, 1),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
