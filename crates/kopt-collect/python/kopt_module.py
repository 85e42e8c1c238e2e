# kopt's loader for module scripts in the KernelBench convention: a script
# that defines an nn.Module class (`Model`, or the class the module name
# names) and get_inputs() (optionally get_init_inputs()). Shared by the
# profile driver and the optimize harness; kopt writes it beside them.
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
