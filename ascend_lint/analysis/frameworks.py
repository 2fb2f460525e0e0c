"""Framework entry points, hooks and device abstractions as data, for the execution model (issue #29).

The execution model gives every function a role: it runs per training/inference step, per forward/construct,
at set-up, at load time, once, offline (tests, tools), or it is reached from nothing. Code the project calls
itself is followed through calls; code that a *framework* calls is invisible to that walk. This module says,
as data, which code a framework calls and how often:

- `HOOKS`: a project class deriving from one of `bases` has its `methods` called by the framework, with `role`
  (HF `Trainer.compute_loss`, Lightning `training_step`, mmengine `Hook.after_train_iter`, MindSpore
  `Callback.step_end`, `TrainOneStepCell.construct`, ...). `drivers` name the calls that start the framework's
  loop (`trainer.train()`), so a hook counts only when reached code calls a driver or the framework itself is
  the entry point.
- `PASSED_FUNCTIONS`: a function passed to a framework call as a named (or positional) argument is called by
  the framework with `role` (Megatron `forward_backward_func(forward_step_func=...)`, MindSpore
  `data_sink(fn, ...)`, `value_and_grad(fn, ...)`).
- Not data, but a propagation rule the model needs with these tables: a forward step returns its loss
  function as `functools.partial(loss_func, ...)` for the schedule to call, so a function a per-step function
  returns (bare or in a partial) is per-step too (Megatron `forward_step` -> `loss_func`).
- `NAMED_ROLES`: functions whose own name says when they run (`process_weights_after_loading`, `weight_loader`).
- `DEVICE_ABSTRACTIONS`: accessor calls, module-level objects and classes whose methods synchronize with the
  device or return a device (`get_accelerator().synchronize()`, `torch.get_device_module().synchronize()`,
  vLLM `current_platform`, accelerate `Accelerator`).
- `MODEL_REGISTRIES`: how a model class gets built from a name (a registry decorator and the build call that
  reads the name), so a class counts as built only when reached code builds it.

Every entry names the public source it was checked against (a URL, or `repo@commit:path` of a tuning
repository checked out for the research in docs/execution-model-research.md). `reason` texts are message
fragments: `{name}` is filled with the project's method or function name and `{base}` with the framework
base or call it was matched through.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, Optional, Tuple

# The roles a function can have; the execution model adds "unreached" for code no entry point reaches.
PER_STEP = "per_step"  # every training step (or every decode step of an inference engine)
PER_FORWARD = "per_forward"  # every forward/construct of a model (so at least per step)
SETUP = "setup"  # building models, optimizers, data loaders, hooks before the loop
LOAD = "load"  # loading or converting weights and checkpoints
ONCE = "once"  # begin/end of a run, per epoch or per evaluation: not per step
OFFLINE = "offline"  # tests, benchmarks, tools, conversion scripts
ROLES: Tuple[str, ...] = (PER_STEP, PER_FORWARD, SETUP, LOAD, ONCE, OFFLINE)


@dataclass(frozen=True)
class HookSet:
    """Methods a framework calls on a project class that derives from one of `bases`."""

    framework: str
    bases: Tuple[str, ...]  # qualified names of the framework classes
    methods: Tuple[str, ...]  # hook method names
    role: str
    reason: str  # message fragment; `{name}` = the method, `{base}` = the framework base
    drivers: Tuple[str, ...]  # method names on the framework object that run the loop calling the hooks
    source: str


@dataclass(frozen=True)
class PassedFunction:
    """A function passed to a framework call, which the framework then calls with `role`."""

    framework: str
    calls: Tuple[str, ...]  # qualified call names, or `*.last` for any receiver/module with that last name
    arguments: Tuple[Tuple[str, Optional[int]], ...]  # (keyword, position or None) of the passed function
    role: str
    reason: str  # `{name}` = the passed function, `{base}` = the call
    source: str


@dataclass(frozen=True)
class NamedRole:
    """Functions whose name says when they run (the framework calls them by that name)."""

    framework: str
    names: Tuple[str, ...]  # exact function or method names
    role: str
    reason: str
    source: str


@dataclass(frozen=True)
class DeviceAbstraction:
    """A device-neutral handle whose methods reach the accelerator: a sync, or a device for placement."""

    name: str
    accessors: Tuple[str, ...]  # qualified calls returning the handle (`deepspeed.accelerator.get_accelerator`)
    objects: Tuple[str, ...]  # qualified module-level handles (`vllm.platforms.current_platform`)
    classes: Tuple[str, ...]  # classes whose instances are handles (`self.accelerator = Accelerator(...)`)
    sync_methods: Tuple[str, ...]  # methods that block the host until the device is done
    device_methods: Tuple[str, ...]  # methods/properties that give a device (placement: device)
    source: str


@dataclass(frozen=True)
class ModelRegistry:
    """How a model class is registered under a name and built from that name."""

    framework: str
    registrars: Tuple[str, ...]  # decorator or call last names that register a class (`register_module`)
    builders: Tuple[str, ...]  # call last names that build from a registered name or config (`build`)
    source: str
    # module-level or class-level dicts mapping a name to a class or a dotted class path: a class is built
    # only through an entry that reached code reads
    mappings: Tuple[str, ...] = ()


_HF_TRAINER = "huggingface/transformers src/transformers/trainer.py; " \
              "https://huggingface.co/docs/transformers/main_classes/trainer"
_HF_CALLBACK = "huggingface/transformers src/transformers/trainer_callback.py (CallbackHandler.on_*)"
_LIGHTNING_HOOKS = "https://lightning.ai/docs/pytorch/stable/api/lightning.pytorch.core.hooks.ModelHooks.html"
_LIGHTNING_CALLBACK = "https://lightning.ai/docs/pytorch/stable/api/pytorch_lightning.callbacks.Callback.html"
_MMENGINE_HOOK = "open-mmlab/mmengine@254342938d9b:mmengine/hooks/hook.py"
_MMENGINE_MODEL = "open-mmlab/mmengine@254342938d9b:mmengine/model/base_model/base_model.py"
_MS_CALLBACK = "https://www.mindspore.cn/docs/zh-CN/master/_sources/api_python/train/mindspore.train.Callback.rst.txt"
_MS_TRAIN_CELLS = "https://mindspore.cn/docs/zh-CN/r2.0/api_python/nn/mindspore.nn.TrainOneStepCell.html; " \
                  "https://mindspore.cn/docs/zh-CN/master/_sources/api_python/nn/" \
                  "mindspore.nn.TrainOneStepWithLossScaleCell.rst.txt"
_LMDEPLOY_AGENT = "InternLM/lmdeploy@1263d5cd889b:lmdeploy/pytorch/engine/model_agent/agent.py"

_HF_BASES = ("transformers.Trainer", "transformers.trainer.Trainer", "transformers.Seq2SeqTrainer",
             "transformers.trainer_seq2seq.Seq2SeqTrainer")
_HF_CALLBACK_BASES = ("transformers.TrainerCallback", "transformers.trainer_callback.TrainerCallback")
_LIGHTNING_MODULES = ("lightning.pytorch.LightningModule", "lightning.LightningModule",
                      "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
                      "lightning.pytorch.core.LightningModule")
_LIGHTNING_CALLBACKS = ("lightning.pytorch.Callback", "lightning.pytorch.callbacks.Callback", "lightning.Callback",
                        "pytorch_lightning.Callback", "pytorch_lightning.callbacks.Callback")
_MMENGINE_HOOKS = ("mmengine.hooks.Hook", "mmengine.hooks.hook.Hook", "mmcv.runner.Hook", "mmcv.runner.hooks.Hook")
_MMENGINE_MODELS = ("mmengine.model.BaseModel", "mmengine.model.base_model.BaseModel")
_MS_CALLBACKS = ("mindspore.train.Callback", "mindspore.train.callback.Callback", "mindspore.Callback",
                 "mindspore.train.callback._callback.Callback", "mindformers.core.MFLossMonitor",
                 "mindformers.core.callback.MFLossMonitor")
_MS_TRAIN_ONE_STEP = ("mindspore.nn.TrainOneStepCell", "mindspore.nn.TrainOneStepWithLossScaleCell",
                      "mindspore.nn.wrap.cell_wrapper.TrainOneStepCell",
                      "mindspore.nn.wrap.loss_scale.TrainOneStepWithLossScaleCell")
_MS_LOSS_CELLS = ("mindspore.nn.WithLossCell", "mindspore.nn.wrap.cell_wrapper.WithLossCell")

HOOKS: Tuple[HookSet, ...] = (
    # --- transformers Trainer (and TRL / ms-swift trainers, which derive from it) -------------------------
    HookSet("transformers", _HF_BASES,
            ("compute_loss", "training_step", "_prepare_inputs", "get_batch_samples"), PER_STEP,
            "`{base}.{name}` override, called by the HF Trainer step", ("train",), _HF_TRAINER),
    HookSet("transformers", _HF_BASES, ("prediction_step", "evaluate", "predict", "evaluation_loop"), ONCE,
            "`{base}.{name}` override, called per evaluation", ("train", "evaluate", "predict"), _HF_TRAINER),
    HookSet("transformers", _HF_BASES,
            ("create_optimizer", "create_scheduler", "create_optimizer_and_scheduler", "get_train_dataloader",
             "get_eval_dataloader", "get_test_dataloader"), SETUP,
            "`{base}.{name}` override, called before the HF Trainer loop", ("train",), _HF_TRAINER),
    HookSet("transformers", _HF_BASES, ("_save_checkpoint", "save_model", "_load_from_checkpoint"), LOAD,
            "`{base}.{name}` override, called on save/load", ("train",), _HF_TRAINER),
    HookSet("transformers", _HF_CALLBACK_BASES,
            ("on_step_begin", "on_step_end", "on_substep_end", "on_pre_optimizer_step", "on_optimizer_step"),
            PER_STEP, "`{base}.{name}`, called by the HF Trainer every step", ("train",), _HF_CALLBACK),
    HookSet("transformers", _HF_CALLBACK_BASES,
            ("on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_evaluate",
             "on_predict", "on_save", "on_log", "on_prediction_step"), ONCE,
            "`{base}.{name}`, called by the HF Trainer per epoch/log/evaluation", ("train",), _HF_CALLBACK),
    # --- PyTorch Lightning ---------------------------------------------------------------------------------
    HookSet("lightning", _LIGHTNING_MODULES,
            ("training_step", "on_train_batch_start", "on_train_batch_end", "on_before_backward",
             "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad", "optimizer_step",
             "optimizer_zero_grad", "backward", "configure_gradient_clipping"), PER_STEP,
            "`{base}.{name}`, called by the Lightning Trainer every batch", ("fit",), _LIGHTNING_HOOKS),
    HookSet("lightning", _LIGHTNING_MODULES,
            ("validation_step", "test_step", "predict_step", "on_train_epoch_start", "on_train_epoch_end",
             "on_validation_epoch_end", "on_fit_start", "on_fit_end", "on_train_start", "on_train_end"), ONCE,
            "`{base}.{name}`, called by the Lightning Trainer per epoch/evaluation",
            ("fit", "validate", "test", "predict"), _LIGHTNING_HOOKS),
    HookSet("lightning", _LIGHTNING_MODULES, ("configure_optimizers", "setup", "configure_model", "prepare_data"),
            SETUP, "`{base}.{name}`, called before the Lightning loop", ("fit",), _LIGHTNING_HOOKS),
    HookSet("lightning", _LIGHTNING_MODULES + _LIGHTNING_CALLBACKS, ("on_save_checkpoint", "on_load_checkpoint"),
            LOAD, "`{base}.{name}`, called on checkpoint save/load", ("fit",), _LIGHTNING_HOOKS),
    HookSet("lightning", _LIGHTNING_CALLBACKS,
            ("on_train_batch_start", "on_train_batch_end", "on_before_backward", "on_after_backward",
             "on_before_optimizer_step", "on_before_zero_grad"), PER_STEP,
            "`{base}.{name}`, called by the Lightning Trainer every batch", ("fit",), _LIGHTNING_CALLBACK),
    HookSet("lightning", _LIGHTNING_CALLBACKS,
            ("on_train_epoch_start", "on_train_epoch_end", "on_validation_batch_end", "on_validation_epoch_end",
             "on_fit_start", "on_fit_end", "on_train_start", "on_train_end", "setup", "teardown"), ONCE,
            "`{base}.{name}`, called by the Lightning Trainer per epoch/evaluation", ("fit",), _LIGHTNING_CALLBACK),
    # --- mmengine / mmcv runners ---------------------------------------------------------------------------
    HookSet("mmengine", _MMENGINE_HOOKS, ("before_train_iter", "after_train_iter"), PER_STEP,
            "`{base}.{name}`, called by the mmengine runner every iteration", ("train",), _MMENGINE_HOOK),
    HookSet("mmengine", _MMENGINE_HOOKS,
            ("before_run", "after_run", "before_train", "after_train", "before_train_epoch", "after_train_epoch",
             "before_val", "after_val", "before_val_epoch", "after_val_epoch", "before_val_iter", "after_val_iter",
             "before_test", "after_test", "before_test_epoch", "after_test_epoch", "before_test_iter",
             "after_test_iter"), ONCE,
            "`{base}.{name}`, called by the mmengine runner per run/epoch/evaluation", ("train", "val", "test"),
            _MMENGINE_HOOK),
    HookSet("mmengine", _MMENGINE_HOOKS, ("before_save_checkpoint", "after_load_checkpoint"), LOAD,
            "`{base}.{name}`, called on checkpoint save/load", ("train",), _MMENGINE_HOOK),
    HookSet("mmengine", _MMENGINE_MODELS, ("train_step", "parse_losses", "_run_forward"), PER_STEP,
            "`{base}.{name}`, called by the mmengine train loop every iteration", ("train",), _MMENGINE_MODEL),
    HookSet("mmengine", _MMENGINE_MODELS, ("val_step", "test_step", "predict"), ONCE,
            "`{base}.{name}`, called by the mmengine val/test loop", ("val", "test"), _MMENGINE_MODEL),
    # --- DeepSpeed pipeline module: its loss function is passed (see PASSED_FUNCTIONS) ----------------------
    # --- MindSpore -------------------------------------------------------------------------------------------
    HookSet("mindspore", _MS_CALLBACKS,
            ("step_begin", "step_end", "on_train_step_begin", "on_train_step_end"), PER_STEP,
            "`{base}.{name}`, called by `Model.train` every step (every sink in data-sink mode)",
            ("train", "fit"), _MS_CALLBACK),
    HookSet("mindspore", _MS_CALLBACKS,
            ("begin", "end", "epoch_begin", "epoch_end", "on_train_begin", "on_train_end", "on_train_epoch_begin",
             "on_train_epoch_end", "on_eval_begin", "on_eval_end", "on_eval_epoch_begin", "on_eval_epoch_end",
             "on_eval_step_begin", "on_eval_step_end"), ONCE,
            "`{base}.{name}`, called by `Model.train`/`Model.eval` per run/epoch/evaluation", ("train", "fit", "eval"),
            _MS_CALLBACK),
    HookSet("mindspore", _MS_TRAIN_ONE_STEP, ("construct",), PER_STEP,
            "`{base}.construct`, the training step that `Model.train` or a step loop runs", ("train", "fit"),
            _MS_TRAIN_CELLS),
    HookSet("mindspore", _MS_LOSS_CELLS, ("construct",), PER_FORWARD,
            "`{base}.construct`, the forward-with-loss of every training step", ("train", "fit"), _MS_TRAIN_CELLS),
    # --- lmdeploy-style inference engines: one step = one decode step of the batch ----------------------------
    HookSet("lmdeploy", ("lmdeploy.pytorch.models.utils.cudagraph.CudaGraphMixin",
                         "lmdeploy.pytorch.models.utils.model.DeployModelMixin",
                         "lmdeploy.pytorch.models.utils.model.DeployModelMixinV1"),
            ("prepare_inputs_for_generation", "get_logits", "fill_buffers_cudagraph"), PER_STEP,
            "`{base}.{name}`, called by the lmdeploy engine every decode step", ("forward",),
            _LMDEPLOY_AGENT + "; lmdeploy/pytorch/models/utils/cudagraph.py"),
    HookSet("lmdeploy", ("lmdeploy.pytorch.models.utils.cudagraph.CudaGraphMixin",
                         "lmdeploy.pytorch.models.utils.model.DeployModelMixin"),
            ("make_buffers_cudagraph", "support_cuda_graph", "update_weights", "load_weights"), LOAD,
            "`{base}.{name}`, called when the lmdeploy engine builds or loads the model", ("build_model",),
            "InternLM/lmdeploy@1263d5cd889b:lmdeploy/pytorch/models/utils/cudagraph.py, models/llama.py"),
)

PASSED_FUNCTIONS: Tuple[PassedFunction, ...] = (
    # Megatron-LM / MindSpeed: pretrain(..., forward_step_func) -> train_step -> forward_backward_func(...)
    PassedFunction("megatron", ("*.pretrain",), (("forward_step_func", 3),), PER_STEP,
                   "`{name}` is the forward step `{base}` runs every micro-batch",
                   "Ascend/MindSpeed-LLM@c77308a14bfc:mindspeed_llm/training/training.py (pretrain), "
                   "pretrain_gpt.py (the call)"),
    PassedFunction("megatron", ("*.pretrain",), (("train_valid_test_dataset_provider", 0), ("model_provider", 1)),
                   SETUP, "`{name}` builds the datasets/model before `{base}` trains",
                   "Ascend/MindSpeed-LLM@c77308a14bfc:mindspeed_llm/training/training.py"),
    PassedFunction("megatron", ("*.train_step",), (("forward_step_func", 0),), PER_STEP,
                   "`{name}` is the forward step `{base}` runs every micro-batch",
                   "Ascend/MindSpeed@028de58ca629:mindspeed/training.py (train_step)"),
    PassedFunction("megatron", ("*.forward_backward_func", "*.forward_backward_no_pipelining",
                                "*.forward_backward_pipelining_without_interleaving",
                                "*.forward_backward_pipelining_with_interleaving"),
                   (("forward_step_func", None),), PER_STEP,
                   "`{name}` is the forward step that `{base}` runs every micro-batch",
                   "Ascend/MindSpeed-LLM@c77308a14bfc:mindspeed_llm/core/layerwise_disaggregated_training/"
                   "training.py (forward_backward_func call)"),
    # DeepSpeed pipeline module: loss_fn(outputs, labels) every micro-batch
    PassedFunction("deepspeed", ("deepspeed.pipe.PipelineModule", "deepspeed.runtime.pipe.module.PipelineModule",
                                 "*.PipelineModule"),
                   (("loss_fn", None),), PER_STEP, "`{name}` is the loss `{base}` computes every micro-batch",
                   "microsoft/DeepSpeed@38327e07f6cd:deepspeed/runtime/pipe/module.py (loss_fn)"),
    # HF Trainer's compute_loss_func argument (transformers >= 4.46)
    PassedFunction("transformers", _HF_BASES, (("compute_loss_func", None),), PER_STEP,
                   "`{name}` is passed to `{base}`, which calls it every step",
                   _HF_TRAINER + " (Trainer.__init__ compute_loss_func)"),
    PassedFunction("transformers", _HF_BASES, (("compute_metrics", None), ("model_init", None)), ONCE,
                   "`{name}` is passed to `{base}`, which calls it per evaluation or once",
                   _HF_TRAINER + " (Trainer.__init__ compute_metrics, model_init)"),
    # MindSpore functional training
    PassedFunction("mindspore", ("mindspore.data_sink", "mindspore.train.data_sink", "*.data_sink"),
                   (("fn", 0),), PER_STEP, "`{name}` is the step function `{base}` sinks to the device",
                   "https://mindspore.cn/docs/zh-CN/master/api_python/mindspore/mindspore.data_sink.html"),
    PassedFunction("mindspore", ("mindspore.value_and_grad", "mindspore.ops.value_and_grad", "mindspore.grad",
                                 "mindspore.ops.grad", "*.value_and_grad"),
                   (("fn", 0),), PER_STEP, "`{name}` is differentiated by `{base}` in the training step",
                   "https://www.mindspore.cn/docs/en/master/api_python/mindspore/mindspore.value_and_grad.html"),
    PassedFunction("mindspore", ("mindspore.train.Model", "mindspore.Model", "mindspore.train.model.Model"),
                   (("network", 0), ("loss_fn", 1)), PER_FORWARD,
                   "`{name}` is the network/loss `{base}` runs every step",
                   "https://www.mindspore.cn/docs/en/master/api_python/train/mindspore.train.Model.html"),
    PassedFunction("mindspore", _MS_TRAIN_ONE_STEP + _MS_LOSS_CELLS + ("*.TrainOneStepCell", "*.WithLossCell"),
                   (("network", 0), ("loss_fn", 1)), PER_FORWARD,
                   "`{name}` is wrapped by `{base}`, which runs it every step", _MS_TRAIN_CELLS),
    # torch: functions registered as module hooks run on every forward/backward
    PassedFunction("torch", ("*.register_forward_hook", "*.register_forward_pre_hook", "*.register_full_backward_hook",
                             "*.register_hook", "*.register_post_accumulate_grad_hook"),
                   (("hook", 0),), PER_FORWARD, "`{name}` is a hook registered with `{base}`",
                   "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html"
                   "#torch.nn.Module.register_forward_hook"),
)

NAMED_ROLES: Tuple[NamedRole, ...] = (
    NamedRole("vllm/lmdeploy", ("process_weights_after_loading", "weight_loader", "load_weights"), LOAD,
              "`{name}` runs when the engine loads weights",
              "InternLM/lmdeploy@1263d5cd889b:lmdeploy/pytorch/nn/norm.py (weight_loader), "
              "models/llama.py (load_weights); modelscope/ms-swift@3602360a5623 (process_weights_after_loading)"),
    NamedRole("torch", ("load_state_dict", "_load_from_state_dict", "from_pretrained", "_init_weights",
                        "init_weights", "reset_parameters"), LOAD,
              "`{name}` runs when the model is built or loaded",
              "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html"),
)

DEVICE_ABSTRACTIONS: Tuple[DeviceAbstraction, ...] = (
    DeviceAbstraction(
        "deepspeed",
        ("deepspeed.accelerator.get_accelerator", "deepspeed.accelerator.real_accelerator.get_accelerator"),
        (), ("deepspeed.accelerator.abstract_accelerator.DeepSpeedAccelerator",),
        ("synchronize",), ("current_device", "current_device_name", "device", "device_name"),
        "microsoft/DeepSpeed@38327e07f6cd:accelerator/abstract_accelerator.py, accelerator/real_accelerator.py"),
    DeviceAbstraction(
        "torch", ("torch.get_device_module",), ("torch.accelerator",), (),
        ("synchronize",), ("current_device", "current_device_index", "current_accelerator"),
        "https://docs.pytorch.org/docs/stable/generated/torch.get_device_module.html; torch.accelerator "
        "(used as torch.accelerator.current_accelerator in Ascend/MindSpeed-LLM@c77308a14bfc)"),
    DeviceAbstraction(
        "torch_npu", (), ("torch.npu", "torch_npu.npu", "torch.cuda"), (),
        ("synchronize",), ("current_device",),
        "https://hiascend.com/document/detail/zh/Pytorch/60RC3/apiref/apilist/ptaoplist_000599.html "
        "(torch::npu::synchronize); https://docs.pytorch.org/docs/stable/generated/torch.cuda.synchronize.html"),
    DeviceAbstraction(
        "vllm", (), ("vllm.platforms.current_platform",), ("vllm.platforms.interface.Platform",),
        ("synchronize",), ("current_device", "device_type", "device_name"),
        "vllm-project/vllm vllm/platforms/interface.py (Platform.__getattr__ forwards to torch.<device_type>)"),
    DeviceAbstraction(
        "accelerate", (), (), ("accelerate.Accelerator", "accelerate.accelerator.Accelerator",
                               "accelerate.PartialState", "accelerate.state.PartialState"),
        (), ("device",),
        "huggingface/accelerate@16cb6eb80dd9:src/accelerate/accelerator.py (Accelerator.device)"),
    DeviceAbstraction(
        "lmdeploy", ("lmdeploy.pytorch.devices.get_device_manager",), (), (), (), ("current_context",),
        "InternLM/lmdeploy@1263d5cd889b:lmdeploy/pytorch/devices/device_manager.py"),
)

MODEL_REGISTRIES: Tuple[ModelRegistry, ...] = (
    ModelRegistry("mmengine", ("register_module",), ("build", "build_model"),
                  "open-mmlab/mmengine@254342938d9b:mmengine/registry/registry.py (register_module, build)"),
    ModelRegistry("mindcv", ("register_model",), ("create_model",),
                  "mindspore-lab/mindcv@51b0636da1e3:mindcv/models/registry.py, models/model_factory.py"),
    ModelRegistry("transformers", ("register",), ("from_pretrained", "from_config"),
                  "https://huggingface.co/docs/transformers/model_doc/auto (AutoModel.register)"),
    ModelRegistry("lmdeploy", (), ("build_model",),
                  "InternLM/lmdeploy@1263d5cd889b:lmdeploy/pytorch/models/module_map.py, models/patch.py:108-114 "
                  "(MODULE_MAP overridden per device by DEVICE_SPECIAL_MODULE_MAP, then CUSTOM_MODULE_MAP)",
                  mappings=("MODULE_MAP", "DEVICE_SPECIAL_MODULE_MAP", "CUSTOM_MODULE_MAP", "ASCEND_MODULE_MAP")),
    ModelRegistry("ms-swift", (), ("get_trainer_cls", "get_cls"),
                  "modelscope/ms-swift@3602360a5623:swift/trainers/trainer_factory.py:13 (TRAINER_MAPPING: task "
                  "name -> dotted trainer class path)",
                  mappings=("TRAINER_MAPPING", "TRAINING_ARGS_MAPPING")),
)


def hooks_for(base: str) -> Iterator[HookSet]:
    """The hook sets of a framework base class named by its qualified name."""
    for hook_set in HOOKS:
        if base in hook_set.bases:
            yield hook_set


def hook_role(base: str, method: str) -> Optional[Tuple[str, str]]:
    """(role, reason) of `method` on a class deriving from `base`, or None when the framework never calls it."""
    for hook_set in hooks_for(base):
        if method in hook_set.methods:
            return hook_set.role, hook_set.reason.format(base=base.rsplit(".", 1)[-1], name=method)
    return None


def call_matches(pattern: str, qualname: str) -> bool:
    """`*.last` matches any dotted name ending in `.last` (or `last` alone); other patterns match exactly."""
    if pattern.startswith("*."):
        last = pattern[2:]
        return qualname == last or qualname.endswith("." + last)
    return qualname == pattern


def passed_function_roles(call: str) -> Iterator[PassedFunction]:
    """The records that say what a call does with the functions passed to it."""
    for record in PASSED_FUNCTIONS:
        if any(call_matches(pattern, call) for pattern in record.calls):
            yield record


def device_abstraction_index() -> Dict[str, DeviceAbstraction]:
    """Accessor, object and class qualified names -> the abstraction they give."""
    index: Dict[str, DeviceAbstraction] = {}
    for record in DEVICE_ABSTRACTIONS:
        for name in record.accessors + record.objects + record.classes:
            index[name] = record
    return index
