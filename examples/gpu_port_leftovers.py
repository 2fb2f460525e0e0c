"""ResNet-50 ImageNet DDP training, half-way through a GPU -> Ascend port.

`import torch_npu` was added and the input path already uses the device object, but the rest of the
script still speaks CUDA. Without `torch_npu.contrib.transfer_to_npu` these names fail or do nothing on
Ascend; ascend-lint's migration pack (ASC6xx) lists each one, and `--fix` rewrites most of them
(`.cuda()` -> `.npu()`, 'nccl' -> 'hccl', `torch.cuda.X` -> `torch.npu.X`, tf32 -> hf32, and a test of the
device that only accepts 'cuda' accepts 'npu' too).
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch_npu  # noqa: F401
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import transforms

torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True  # expect: ASC604
torch.backends.cudnn.allow_tf32 = True  # expect: ASC604


def build_loader(root, batch_size, train, device):
    if train:
        tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()])
    else:
        tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
    tf = transforms.Compose([tf, transforms.ToTensor(),
                             transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = torchvision.datasets.ImageFolder(root, tf)
    return DataLoader(data, batch_size=batch_size, sampler=DistributedSampler(data, shuffle=train),
                      num_workers=8, pin_memory=device.type == "cuda", drop_last=train)  # expect: ASC605


def setup(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    torch.cuda.set_device(rank)  # expect: ASC603
    dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)  # expect: ASC602
    return torch.device("cuda:{}".format(rank))  # expect: ASC601


def train_one_epoch(model, loader, criterion, optimizer, scaler, device, epoch):
    model.train()
    end = time.time()
    for step, (images, target) in enumerate(loader):
        images = images.to(device, non_blocking=True)
        target = target.cuda(non_blocking=True)  # expect: ASC601
        with torch.cuda.amp.autocast():  # expect: ASC603
            loss = criterion(model(images), target)
        optimizer.zero_grad(set_to_none=True)  # a torch.optim optimizer: fine
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        torch.cuda.synchronize()  # expect: ASC202, ASC603
        batch_time, end = time.time() - end, time.time()
        if step % 100 == 0:
            mem = torch.cuda.max_memory_allocated() / 2**30  # expect: ASC603
            print(f"epoch {epoch} step {step} loss {loss.item():.4f} {batch_time:.3f}s/it {mem:.1f} GiB")


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(2, device="cuda")  # expect: ASC601
    for images, target in loader:
        images = images.cuda(non_blocking=True)  # expect: ASC601
        target = target.cuda(non_blocking=True)  # expect: ASC601
        stats[0] += (model(images).argmax(dim=1) == target).sum()
        stats[1] += target.numel()
    dist.all_reduce(stats)
    return (stats[0] / stats[1]).item() * 100.0


def main_worker(rank, world_size, args):
    device = setup(rank, world_size)
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)  # expect: ASC603
    model = torchvision.models.resnet50().cuda(rank)  # expect: ASC601
    model = DDP(model, device_ids=[rank])
    criterion = nn.CrossEntropyLoss().cuda()  # expect: ASC601
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)  # expect: ASC301
    scaler = torch.cuda.amp.GradScaler()  # expect: ASC603
    train_loader = build_loader(os.path.join(args.data, "train"), args.batch_size, train=True, device=device)
    val_loader = build_loader(os.path.join(args.data, "val"), args.batch_size, train=False, device=device)
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        train_one_epoch(model, train_loader, criterion, optimizer, scaler, device, epoch)
        top1 = evaluate(model, val_loader)
        if rank == 0:
            print(f"epoch {epoch}: val top-1 {top1:.2f}%")
            torch.save(model.module.state_dict(), f"resnet50_epoch{epoch}.pth")
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/data/imagenet")
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not torch.cuda.is_available():  # expect: ASC603
        raise SystemExit("no accelerator found")
    n_devices = torch.cuda.device_count()  # expect: ASC603
    mp.spawn(main_worker, args=(n_devices, args), nprocs=n_devices)
