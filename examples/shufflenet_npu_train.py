"""ShuffleNetV2 (1.0x) ImageNet training on Ascend NPUs: torch_npu + Ascend apex AMP, 8-card DDP.

A first port of a GPU recipe that runs, but slowly. Much of what ascend-lint reports here is what
Ascend's own ShuffleNetV2 tuning case had to fix: a transpose-and-copy channel shuffle, a chunk followed
by a copy, an index tensor copied to the device in every forward, synchronizes left in the model, and
apex without gradient fusion. Launch with `torchrun --nproc_per_node=8 shufflenet_npu_train.py`.
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch_npu  # noqa: F401  (registers torch.npu)
from apex import amp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms as T

DATA_DIR = os.environ.get("IMAGENET_DIR", "/data/imagenet")
EPOCHS, BATCH_SIZE, BASE_LR = 240, 128, 0.5

# Left on while chasing an AI Core error in the first port.
os.environ["ASCEND_LAUNCH_BLOCKING"] = "1"  # expect: ASC204


def channel_shuffle(feat, groups=2):
    n, c, h, w = feat.shape
    grouped = feat.view(n, groups, c // groups, h, w)
    shuffled = torch.transpose(grouped, 1, 2).contiguous()  # expect: ASC101
    return shuffled.view(n, c, h, w)


def branch(in_ch, out_ch, stride):
    return nn.Sequential(nn.Conv2d(in_ch, in_ch, 3, stride, 1, groups=in_ch, bias=False), nn.BatchNorm2d(in_ch),
                         nn.Conv2d(in_ch, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True))


class DownsampleUnit(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.left = branch(in_ch, out_ch // 2, 2)
        self.right = nn.Sequential(nn.Conv2d(in_ch, out_ch // 2, 1, bias=False), nn.BatchNorm2d(out_ch // 2),
                                   nn.ReLU(inplace=True), branch(out_ch // 2, out_ch // 2, 2))

    def forward(self, x):
        return channel_shuffle(torch.cat((self.left(x), self.right(x)), dim=1))


class BasicUnit(nn.Module):
    def __init__(self, channels):
        super().__init__()
        half = channels // 2
        self.right = nn.Sequential(nn.Conv2d(half, half, 1, bias=False), nn.BatchNorm2d(half),
                                   nn.ReLU(inplace=True), branch(half, half, 1))
        # channel order after a 2-group shuffle: 0, half, 1, half + 1, ...
        self.shuffle_order = [i // 2 + (i % 2) * half for i in range(channels)]

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        out = torch.cat((x1, self.right(x2.contiguous())), dim=1)  # expect: ASC102
        # Ascend-style shuffle with index_select, half done: the index is still copied every call
        index = torch.tensor(self.shuffle_order).to("npu")  # expect: ASC201
        return out.index_select(1, index)


class ShuffleNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 24, 3, 2, 1, bias=False),  # expect: ASC401
            nn.BatchNorm2d(24), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1),
        )
        units, in_ch = [], 24
        for repeats, out_ch in zip((4, 8, 4), (116, 232, 464)):
            units.append(DownsampleUnit(in_ch, out_ch))
            units.extend(BasicUnit(out_ch) for _ in range(repeats - 1))
            in_ch = out_ch
        self.stages = nn.Sequential(*units)
        self.conv5 = nn.Sequential(nn.Conv2d(464, 1024, 1, bias=False), nn.BatchNorm2d(1024), nn.ReLU(inplace=True))
        self.fc = nn.Linear(1024, 1000)  # expect: ASC401

    def forward(self, x):
        x = self.conv5(self.stages(self.stem(x))).mean([2, 3])
        torch.npu.synchronize()  # expect: ASC202
        # classifier kept in fp32 "for a stable softmax" under apex O2
        return torch.matmul(x.float(), self.fc.weight.float().t()) + self.fc.bias.float()  # expect: ASC402


class LabelSmoothingCE(nn.Module):
    """Cross entropy with label smoothing; samples labelled -1 (unlabelled crops) are ignored."""
    def __init__(self, smoothing=0.1, ignore_index=-1):
        super().__init__()
        self.smoothing, self.ignore_index = smoothing, ignore_index

    def forward(self, logits, target):
        log_probs = F.log_softmax(logits, dim=-1)
        nll = -log_probs.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
        loss = (1.0 - self.smoothing) * nll - self.smoothing * log_probs.mean(dim=-1)
        loss[target == self.ignore_index] = 0.0  # expect: ASC404
        return loss.sum() / torch.nonzero(target != self.ignore_index).size(0)  # expect: ASC404


def accuracy(logits, target):
    return logits.argmax(dim=1).eq(target).double().mean() * 100.0  # expect: ASC403


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.npu.set_device(local_rank)
    dist.init_process_group(backend="hccl")
    device = torch.device(f"npu:{local_rank}")

    model = ShuffleNetV2().to(device)
    backbone = [p for n, p in model.named_parameters() if not n.startswith("fc.")]
    head, lr = list(model.fc.parameters()), BASE_LR
    optimizer = torch.optim.SGD([{"params": backbone, "lr": lr}, {"params": head, "lr": lr}], momentum=0.9)  # expect: ASC301, ASC302
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=128.0)  # expect: ASC303, ASC305
    model = DDP(model, device_ids=[local_rank], broadcast_buffers=False)
    criterion = LabelSmoothingCE().to(device)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = datasets.ImageFolder(os.path.join(DATA_DIR, "train"), tf)
    loader = DataLoader(data, batch_size=BATCH_SIZE, sampler=DistributedSampler(data), num_workers=16, drop_last=True)  # expect: ASC503

    for epoch in range(EPOCHS):
        loader.sampler.set_epoch(epoch)
        running_loss = 0.0
        for step, (images, target) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            logits = model(images)
            loss = criterion(logits, target)
            optimizer.zero_grad()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
            running_loss += loss.item()  # expect: ASC203
            torch.save(model.state_dict(), "shufflenet_latest.pth")  # expect: ASC501
            if step % 100 == 0:
                torch.npu.synchronize()  # once every 100 steps, for the log: not flagged
                top1 = accuracy(logits, target).item()
                print(f"epoch {epoch} step {step} loss {running_loss / (step + 1):.4f} top1 {top1:.2f}")
        if dist.get_rank() == 0:
            torch.save(model.module.state_dict(), f"shufflenet_epoch{epoch}.pth")  # once per epoch: not flagged


if __name__ == "__main__":
    main()
