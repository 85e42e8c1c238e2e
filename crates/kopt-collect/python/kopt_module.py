# kopt's loader for module scripts in the KernelBench convention: a script
# that defines an nn.Module class (`Model`, or the class the module name
# names) and get_inputs() (optionally get_init_inputs()). Shared by the
# profile driver and the optimize harness; kopt writes it beside them.
#
# The training form: a script that also defines train_step(model, inputs,
# optimizer) (forward, loss, backward, optimizer step, zero_grad) and,
# optionally, make_optimizer(model) is driven one train_step a step, with
# autograd on and the model in train mode (without make_optimizer, the
# optimizer argument is None).
import importlib.util
import sys

import torch


def load(path, module_name):
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


def build(path, module_name, device):
    """The module's model on `device` (eval mode) and a function giving fresh inputs."""
    mod = load(path, module_name)
    init = mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []
    model = pick_class(mod, path, module_name)(*init).to(device).eval()

    def inputs():
        return [to_device(x, device) for x in mod.get_inputs()]

    return model, inputs


def build_step(path, module_name, device):
    """One step of the script as a function of its inputs: train_step with
    autograd on where the script defines it (the training form), else the
    forward (the caller runs it in inference mode). Returns (step,
    make_inputs, training)."""
    mod = load(path, module_name)
    init = mod.get_init_inputs() if hasattr(mod, "get_init_inputs") else []
    model = pick_class(mod, path, module_name)(*init).to(device)
    train_step = getattr(mod, "train_step", None)

    def inputs():
        return [to_device(x, device) for x in mod.get_inputs()]

    if not callable(train_step):
        model.eval()
        return (lambda xs: model(*xs)), inputs, False
    model.train()
    make_optimizer = getattr(mod, "make_optimizer", None)
    optimizer = make_optimizer(model) if callable(make_optimizer) else None

    def step(xs):
        with torch.enable_grad():
            return train_step(model, xs, optimizer)

    return step, inputs, True
