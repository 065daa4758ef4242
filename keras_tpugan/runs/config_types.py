"""Reading `key=value` settings (`TrainConfig.override`, `--set`): a value
checked and parsed against the annotation of its `TrainConfig` field."""

import types
import typing


def _is_union(annotation):
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def is_type(value, annotation):
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if _is_union(annotation):
        return any(is_type(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    return isinstance(value, annotation)


def type_name(annotation):
    if _is_union(annotation):
        return " or ".join(type_name(a) for a in typing.get_args(annotation))
    return "None" if annotation is type(None) else annotation.__name__


def parse_value(text, annotation, key):
    options = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    if type(None) in options and text.lower() in ("none", "null", ""):
        return None
    for option in options:
        try:
            if option is bool:
                if text.lower() in ("true", "1", "yes", "on"):
                    return True
                if text.lower() in ("false", "0", "no", "off"):
                    return False
                raise ValueError
            if option is not type(None):
                return option(text)
        except ValueError:
            continue
    raise ValueError(
        f"Expected {key} to be {type_name(annotation)}. Received: {text!r}."
    )
