"""ResNet-50 ImageNet training with MindSpore on Ascend, plus a cosine-classifier fine-tune.

Stage 1 trains with `Model.train` in dataset sink mode; stage 2 fine-tunes a cosine classifier head on
the 64 base classes of a few-shot split with a hand-written loop. It runs as is; ascend-lint points out
the Ascend tuning left undone: a 1000-wide classifier, an fp32 MatMul, constants rebuilt from numpy in
`construct`, synchronous checkpoints and a dataset pipeline without AutoTune.
"""
import os

import mindspore as ms
import mindspore.dataset as ds
import mindspore.dataset.transforms as transforms
import mindspore.dataset.vision as vision
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore import dtype as mstype
from mindspore.common.initializer import Normal, initializer
from mindspore.train import CheckpointConfig, LossMonitor, Model, ModelCheckpoint, TimeMonitor

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def create_dataset(data_dir, batch_size, workers=8):
    data = ds.ImageFolderDataset(data_dir, shuffle=True, num_parallel_workers=workers)
    image_ops = [vision.Decode(), vision.RandomResizedCrop(224), vision.RandomHorizontalFlip(),
                 vision.Rescale(1.0 / 255.0, 0.0), vision.HWC2CHW()]
    data = data.map(operations=image_ops, input_columns="image", num_parallel_workers=workers)
    data = data.map(operations=transforms.TypeCast(mstype.int32), input_columns="label")
    return data.batch(batch_size, drop_remainder=True)


class Bottleneck(nn.Cell):
    def __init__(self, in_ch, mid_ch, stride=1):
        super().__init__()
        out_ch = mid_ch * 4
        self.body = nn.SequentialCell([
            nn.Conv2d(in_ch, mid_ch, 1), nn.BatchNorm2d(mid_ch), nn.ReLU(),
            nn.Conv2d(mid_ch, mid_ch, 3, stride=stride), nn.BatchNorm2d(mid_ch), nn.ReLU(),
            nn.Conv2d(mid_ch, out_ch, 1), nn.BatchNorm2d(out_ch),
        ])
        self.shortcut = None
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.SequentialCell([nn.Conv2d(in_ch, out_ch, 1, stride=stride), nn.BatchNorm2d(out_ch)])
        self.relu = nn.ReLU()

    def construct(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        return self.relu(self.body(x) + identity)


class ResNet50(nn.Cell):
    def __init__(self):
        super().__init__()
        self.stem = nn.SequentialCell([nn.Conv2d(3, 64, 7, stride=2, pad_mode="pad", padding=3),
                                       nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, stride=2, pad_mode="same")])
        blocks, in_ch = [], 64
        for mid_ch, repeats, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(repeats):
                blocks.append(Bottleneck(in_ch, mid_ch, stride if i == 0 else 1))
                in_ch = mid_ch * 4
        self.layers = nn.SequentialCell(blocks)
        self.pool = ops.ReduceMean(keep_dims=False)
        self.fc = nn.Dense(2048, 1000)  # expect: ASC401

    def construct(self, x):
        # normalise raw [0, 1] pixels inside the network, so the exported model takes plain images
        mean = Tensor(np.array(IMAGENET_MEAN, np.float32).reshape(1, 3, 1, 1))  # expect: ASC201
        std = Tensor(np.array(IMAGENET_STD, np.float32).reshape(1, 3, 1, 1))  # expect: ASC201
        x = self.layers(self.stem((x - mean) / std))
        return self.fc(self.pool(x, (2, 3)))


class CosineHead(nn.Cell):
    """Cosine-similarity classifier: logits = scale * <x / |x|, w / |w|>."""

    def __init__(self, in_channels, num_classes, scale=16.0):
        super().__init__()
        self.weight = Parameter(initializer(Normal(0.01), (num_classes, in_channels), mstype.float32))
        self.normalize = ops.L2Normalize(axis=1)
        self.matmul = ops.MatMul(transpose_b=True)  # expect: ASC402
        self.scale = scale

    def construct(self, x):
        return self.matmul(self.normalize(x), self.normalize(self.weight)) * self.scale


def train(data_dir, epochs=90, batch_size=256):
    dataset = create_dataset(data_dir, batch_size)
    steps = dataset.get_dataset_size()
    net = ResNet50()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    lr = nn.cosine_decay_lr(0.0, 0.1, steps * epochs, steps, epochs)
    opt = nn.Momentum(net.trainable_params(), learning_rate=lr, momentum=0.9, weight_decay=1e-4)
    model = Model(net, loss, opt, metrics={"acc"})
    ckpt_cfg = CheckpointConfig(save_checkpoint_steps=steps, keep_checkpoint_max=10)  # expect: ASC501
    ckpt_cb = ModelCheckpoint(prefix="resnet50", directory="./ckpt", config=ckpt_cfg)
    model.train(epochs, dataset, callbacks=[ckpt_cb, LossMonitor(100), TimeMonitor()], dataset_sink_mode=True)  # expect: ASC502
    return net


def finetune_cosine_head(net, data_dir, num_classes, epochs):
    net.fc = CosineHead(2048, num_classes)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    opt = nn.Momentum(net.fc.trainable_params(), learning_rate=0.01, momentum=0.9)
    train_net = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    train_net.set_train()
    dataset = create_dataset(data_dir, batch_size=64)
    for epoch in range(epochs):
        for step, (images, labels) in enumerate(dataset.create_tuple_iterator()):
            loss = train_net(images, labels)
            if step % 100 == 0:
                print(f"epoch {epoch} step {step} loss {loss}")  # every 100 steps: not flagged
                ms.save_checkpoint(net, "resnet50_cosine_last.ckpt")  # expect: ASC501
        ms.save_checkpoint(net, f"resnet50_cosine_e{epoch}.ckpt")  # once per epoch: not flagged


if __name__ == "__main__":
    ms.set_context(device_target="Ascend")
    root = os.environ.get("IMAGENET_DIR", "/data/imagenet")
    net = train(os.path.join(root, "train"))
    ms.save_checkpoint(net, "resnet50_final.ckpt")  # a single save outside any loop: not flagged
    finetune_cosine_head(net, os.path.join(root, "fewshot_base"), num_classes=64, epochs=5)
