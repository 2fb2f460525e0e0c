"""MobileNetV1 ImageNet training on one Ascend NPU with torch_npu's fused SGD and native AMP.

This script already follows the Ascend tuning advice: a fused optimizer (`torch_npu.optim.NpuFusedSGD`
instead of `torch.optim.SGD`), `torch.npu.amp` mixed precision, a classifier padded to a multiple of 16,
and host syncs only every 100 steps. ascend-lint stays quiet on all of that. Two habits carried over
from the `torch.optim` version do not work with a fused optimizer, though, and are reported.
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch_npu  # noqa: F401
import torchvision.datasets as datasets
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torch_npu.optim import NpuFusedSGD

NUM_CLASSES = 1000
# The Cube unit works on 16x16 tiles: pad the classifier to 1008 outputs and drop the extra logits.
PADDED_CLASSES = (NUM_CLASSES + 15) // 16 * 16


class DepthwiseSeparable(nn.Module):
    def __init__(self, in_ch, out_ch, stride):
        super().__init__()
        self.depthwise = nn.Conv2d(in_ch, in_ch, 3, stride, 1, groups=in_ch, bias=False)
        self.bn1 = nn.BatchNorm2d(in_ch)
        self.pointwise = nn.Conv2d(in_ch, out_ch, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.act(self.bn1(self.depthwise(x)))
        return self.act(self.bn2(self.pointwise(x)))


class MobileNetV1(nn.Module):
    def __init__(self):
        super().__init__()
        widths = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2)]
        widths += [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*[DepthwiseSeparable(i, o, s) for i, o, s in widths])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(1024, PADDED_CLASSES)

    def forward(self, x):
        x = self.pool(self.blocks(self.stem(x)))
        x = x.view(x.size(0), -1).contiguous()  # `.contiguous()` on a view: no copy, not flagged
        return self.fc(x)[:, :NUM_CLASSES]


def build_loader(root, batch_size):
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = datasets.ImageFolder(os.path.join(root, "train"), tf)
    return DataLoader(data, batch_size=batch_size, shuffle=True, num_workers=16, pin_memory=True, drop_last=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/data/imagenet")
    parser.add_argument("--out", default="./checkpoints")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=150)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    torch.npu.set_device(args.device)
    device = torch.device(f"npu:{args.device}")
    model = MobileNetV1().to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1).to(device)
    optimizer = NpuFusedSGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=4e-5)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    scaler = torch.npu.amp.GradScaler()
    loader = build_loader(args.data, args.batch_size)
    os.makedirs(args.out, exist_ok=True)

    for epoch in range(args.epochs):
        model.train()
        start = time.time()
        for step, (images, target) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            with torch.npu.amp.autocast():
                loss = criterion(model(images), target)
            optimizer.zero_grad(set_to_none=True)  # expect: ASC307
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)  # expect: ASC306
            scaler.step(optimizer)
            scaler.update()
            if step % 100 == 0:
                torch.npu.synchronize()  # timing every 100 steps: not flagged
                speed = (step + 1) * args.batch_size / (time.time() - start)
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} {speed:.0f} img/s")
        scheduler.step()
        # once per epoch, outside the step loop: not flagged
        torch.save({"epoch": epoch, "model": model.state_dict()}, os.path.join(args.out, "mobilenet_v1.pth"))


if __name__ == "__main__":
    main()
