"""The Python half of the policy bridge (python/bridge/bridge.cpp).

It loads a policy class from its file, reads the arguments the class's
constructor declares, and says where in the user's code an exception came
from. Only describe() and line_of() run after a policy is created, and only
when something went wrong.
"""

import importlib.util
import inspect
import itertools
import json
import math
import os
import sys
import traceback
import typing


class ArgumentError(ValueError):
    """Raised by a policy's constructor for an argument of the right type but
    a wrong value; tessel reports it at the argument's line in the
    experiment file, as it does a C++ plugin's."""

    def __init__(self, argument, message):
        super().__init__(message)
        self.argument = argument


class LoadError(Exception):
    """A policy class that cannot be loaded; the message says where."""


# What each stage calls, for the message about a class that lacks it.
_STAGE_METHODS = {
    "admit": "admit(view), which an admission policy needs",
    "allocate": "allocate(view), which an allocation policy needs",
    "place": "place(view, job, want), which a placement policy needs",
    "resize": "resize(view), which an elasticity policy needs",
}

_module_numbers = itertools.count()


def _first_line(obj):
    try:
        return inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return "?"


def load(path, class_name, method=None):
    """(the class `class_name` from the file at `path`, the name its module
    was loaded under). The module is loaded afresh, so that no two plugin
    instances (the runs of a sweep) share its state; unload() forgets it."""
    if not os.path.isfile(path):
        raise LoadError(f"{path}: no such file")
    name = f"tessel_policy_{next(_module_numbers)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: dataclasses, pickle and inspect look there
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    cls = getattr(module, class_name, None)
    if not inspect.isclass(cls):
        classes = sorted(n for n, o in vars(module).items() if inspect.isclass(o) and o.__module__ == name)
        unload(name)
        raise LoadError(f"{path}: defines no class '{class_name}' (classes: {', '.join(classes) or 'none'})")
    if method is not None and not callable(getattr(cls, method, None)):
        where = f"{path}:{_first_line(cls)}"
        unload(name)
        raise LoadError(f"{where}: class {class_name} has no method {_STAGE_METHODS[method]}")
    return cls, name


def unload(name):
    """Forgets the module load() loaded under `name`."""
    sys.modules.pop(name, None)


def takes_seed(cls):
    """Whether the constructor takes `seed`: the run's seed for this plugin,
    which tessel passes itself (it is not an argument of the experiment)."""
    init = cls.__init__
    return init is not object.__init__ and "seed" in inspect.signature(init).parameters


def describe(exc, trace, path):
    """'file:line: Type: message', at the innermost frame of the traceback
    `trace` in the policy's own file (else the innermost frame)."""
    if isinstance(exc, LoadError):
        return str(exc)
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}"
    frames = traceback.extract_tb(trace if trace is not None else exc.__traceback__)
    target = os.path.abspath(path)
    own = [f for f in frames if os.path.abspath(f.filename) == target]
    frame = own[-1] if own else (frames[-1] if frames else None)
    where = f"{frame.filename}:{frame.lineno}: " if frame else f"{path}: "
    try:
        message = str(exc)
    except Exception as failure:  # the policy's exception cannot say what it is
        message = f"(its message could not be made: {type(failure).__name__}: {failure})"
    return f"{where}{type(exc).__name__}: {message}"


def line_of(definition):
    """The line where a class or function is defined, as text ("?" if unknown)."""
    return str(_first_line(definition))


def toml_value(value):
    """`value` in TOML value syntax, as tessel's --set and argument defaults take it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"{value!r} ({type(value).__name__}) has no TOML form")


def _argument_type(annotation, default, has_default, where, name):
    """(tessel argument type, choices) for a constructor parameter."""
    if annotation is inspect.Parameter.empty:
        if not has_default:
            raise LoadError(f"{where}: argument '{name}' has neither a type annotation nor a default; "
                            "tessel checks each argument against one")
        annotation = type(default)
        if annotation is list:
            annotation = list[str] if default and all(isinstance(v, str) for v in default) else list[float]
        elif annotation is dict:
            annotation = dict[str, float]
    origin, parts = typing.get_origin(annotation), typing.get_args(annotation)
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if annotation in simple:
        return simple[annotation], ""
    if origin is typing.Literal and parts and all(isinstance(p, str) for p in parts):
        return "string", "|".join(parts)
    if origin is list and len(parts) == 1 and parts[0] in (float, int):
        return "number_list", ""
    if origin is list and parts == (str,):
        return "string_list", ""
    if origin is dict and len(parts) == 2 and parts[0] is str and parts[1] in (float, int):
        return "number_table", ""
    raise LoadError(f"{where}: argument '{name}' is of type {annotation!r}, which tessel cannot pass; use bool, "
                    "int, float, str, Literal['a', 'b'], list[float], list[str] or dict[str, float]")


def declarations(path, class_name, method=None):
    """The arguments the class's constructor takes, as the bridge declares
    them to the core: (name, type, default in TOML or None, help, choices).
    A parameter's type is its annotation, else its default's type; its help
    is the first string of an Annotated[...] annotation. With `method`, a
    class without it (the stage's method) has none."""
    cls, name = load(path, class_name, method)
    try:
        return _declarations(cls, path, class_name)
    finally:
        unload(name)


def _declarations(cls, path, class_name):
    init = cls.__init__
    if init is object.__init__:
        return []
    where = f"{path}:{_first_line(init)}"
    try:
        hints = typing.get_type_hints(init, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        hints = {}
    out = []
    for parameter in list(inspect.signature(init).parameters.values())[1:]:  # after self
        if parameter.name == "seed":  # tessel's to give, not the experiment's
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            stars = "*" if parameter.kind is parameter.VAR_POSITIONAL else "**"
            raise LoadError(f"{where}: {class_name}.__init__ takes {stars}{parameter.name}; tessel passes "
                            "arguments by name and checks each: name every one")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise LoadError(f"{where}: argument '{parameter.name}' is positional-only; tessel passes arguments by name")
        annotation = hints.get(parameter.name, parameter.annotation)
        help_text = ""
        if typing.get_origin(annotation) is typing.Annotated:
            annotation, *extras = typing.get_args(annotation)
            help_text = next((e for e in extras if isinstance(e, str)), "")
        has_default = parameter.default is not parameter.empty
        kind, choices = _argument_type(annotation, parameter.default, has_default, where, parameter.name)
        default = None
        if has_default:
            try:
                default = toml_value(parameter.default)
            except TypeError as e:
                raise LoadError(f"{where}: the default of argument '{parameter.name}' is not a value a TOML file "
                                f"can hold ({e}); make the argument required or give it one") from None
        out.append((parameter.name, kind, default, help_text, choices))
    return out
