# kopt's loader for module scripts in the KernelBench convention: a script
# that defines an nn.Module class (`Model`, or the class the module name
# names) and get_inputs() (optionally get_init_inputs()). Shared by the
# profile driver and the optimize harness; kopt writes it beside them.
# A script that also defines get_optimizer(model) or train_step(model,
# inputs, optimizer) is a training step (docs/training.md): TrainStep runs
# it with autograd on, its phases in NVTX ranges kopt:data/forward/
# backward/optimizer.
import importlib.util
import os
import sys

import torch


def load(path, module_name):
    # kopt runs a copy of the script from its run folder: the folder it came
    # from goes on sys.path, as Python puts a script's own, so that the
    # script's imports of its neighbours resolve.
    marker = os.path.join(os.path.dirname(os.path.abspath(path)), "kopt_source_dir.txt")
    if os.path.isfile(marker):
        with open(marker, encoding="utf-8") as f:
            source = f.read().strip()
        if os.path.isdir(source) and source not in sys.path:
            sys.path.insert(1, source)
    spec = importlib.util.spec_from_file_location("kopt_user_module", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kopt_user_module"] = mod
    spec.loader.exec_module(mod)
    return mod


def pick_class(mod, path, module_name):
    classes = {
        name: obj
        for name, obj in vars(mod).items()
        if isinstance(obj, type)
        and issubclass(obj, torch.nn.Module)
        and obj.__module__ == mod.__name__
    }
    camel = "".join(p[:1].upper() + p[1:] for p in module_name.split("_"))
    for want in (module_name, camel, "Model", "ModelNew"):
        if want in classes:
            return classes[want]
    flat = module_name.replace("_", "").lower()
    for name, cls in classes.items():
        if name.lower() == flat:
            return cls
    if len(classes) == 1:
        return next(iter(classes.values()))
    sys.exit(
        f"kopt: {path}: no nn.Module class named {module_name!r} or Model "
        f"(classes: {', '.join(sorted(classes)) or 'none'})"
    )


def to_device(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(v, device) for v in x)
    return x


def instantiate(path, module_name, device):
    """The loaded script and its model on `device` (mode untouched)."""
    mod = load(path, module_name)
    init = mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []
    return mod, pick_class(mod, path, module_name)(*init).to(device)


def is_training(mod):
    """Whether the script is a training step (docs/training.md)."""
    return callable(getattr(mod, "get_optimizer", None)) or callable(getattr(mod, "train_step", None))


def build(path, module_name, device):
    """The module's model on `device` (eval mode) and a function giving fresh inputs."""
    mod, model = instantiate(path, module_name, device)
    model = model.eval()

    def inputs():
        return [to_device(x, device) for x in mod.get_inputs()]

    return model, inputs


class _no_context:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def nvtx_phase(name):
    """An NVTX range around a phase: what kopt's tracer records."""
    return torch.cuda.nvtx.range(name)


class TrainStep:
    """One training step of a training-form script, run by `step(i)`.

    `phase(name)` is a context manager marking a phase (NVTX under kopt's
    tracer; record_function for Kineto); `optimizer` replaces the script's
    own (kopt optimize's fused candidate builds its own from it)."""

    def __init__(self, mod, model, device, phase=nvtx_phase, optimizer=None, forward_context=None):
        self.mod, self.model, self.device, self.phase = mod, model.train(), device, phase
        # kopt optimize's bf16 candidate runs forward and loss under autocast.
        self.forward_context = forward_context or _no_context
        if optimizer is None and callable(getattr(mod, "get_optimizer", None)):
            optimizer = mod.get_optimizer(model)
        self.optimizer = optimizer
        self.custom = getattr(mod, "train_step", None)
        if not callable(self.custom) and self.optimizer is None:
            sys.exit("kopt: get_optimizer(model) returned None: a training step needs an optimizer")
        self.inputs = [to_device(x, device) for x in mod.get_inputs()]
        self.loss_fn = getattr(mod, "loss_fn", None)
        default_n = len(self.inputs) - 1 if callable(self.loss_fn) else len(self.inputs)
        self.model_inputs = int(getattr(mod, "MODEL_INPUTS", default_n))
        self.get_batch = getattr(mod, "get_batch", None)
        self.loss = None
        # The class in the name: the analysis prices its fused form by it.
        self.optimizer_phase = "kopt:optimizer#" + type(self.optimizer).__name__
        if callable(self.custom) and self.optimizer is not None:
            self._hook_optimizer()

    def _hook_optimizer(self):
        # A custom step calls optimizer.step() itself: its hooks mark it.
        ranges = []

        def pre(*_):
            ranges.append(self.phase(self.optimizer_phase))
            ranges[-1].__enter__()

        def post(*_):
            if ranges:
                ranges.pop().__exit__(None, None, None)

        if hasattr(self.optimizer, "register_step_pre_hook"):
            self.optimizer.register_step_pre_hook(pre)
            self.optimizer.register_step_post_hook(post)

    def batch(self, i):
        if not callable(self.get_batch):
            return self.inputs
        with self.phase("kopt:data"):
            return [to_device(x, self.device) for x in self.get_batch(i)]

    def loss_of(self, output, inputs):
        if callable(self.loss_fn):
            return self.loss_fn(output, inputs)
        if isinstance(output, (list, tuple)):
            output = output[0]
        return output if output.dim() == 0 else output.float().mean()

    def step(self, i):
        inputs = self.batch(i)
        if callable(self.custom):
            with self.forward_context():
                self.loss = self.custom(self.model, inputs, self.optimizer)
            return self.loss
        with self.phase("kopt:forward"), self.forward_context():
            loss = self.loss_of(self.model(*inputs[: self.model_inputs]), inputs)
        with self.phase("kopt:backward"):
            loss.backward()
        with self.phase(self.optimizer_phase):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        self.loss = loss
        return loss


def autograd_context(training):
    """Autograd on for a training step, inference mode for a forward."""
    return torch.enable_grad() if training else torch.inference_mode()

