"""``superpeer serve``'s settings from a TOML file and ``STREAMGLOBE_…`` variables, not only flags.

Every flag of ``serve`` is a setting with one name: its long flag without the dashes, ``-`` or
``_`` alike (``--metrics-port`` is ``metrics_port`` in a file and ``STREAMGLOBE_METRICS_PORT`` in
the environment; ``state_dir``'s variable is ``STREAMGLOBE_SUPERPEER_STATE_DIR``, as a thin peer's
``STREAMGLOBE_STATE_DIR`` is its saved offsets). Where a setting comes from, the first that has
it wins: the command line, the environment, the super-peer's own ``settings`` in the topology,
the file given with ``--config``, the default. A key of the file that is not a
setting is an error that names the file and the closest setting; so is a value the flag itself
would refuse (each is read by the flag's own parser: ``"500ms"`` for a duration, ``"64MiB"`` for
a size). ``--print-config`` prints the settings in effect as TOML, each with where it came from,
and exits: that file, given back with ``--config``, starts the same super-peer.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

ENV_PREFIX = "STREAMGLOBE_"
NOT_SETTINGS = {"help", "config", "print_config", "func"}
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


class ConfigError(Exception):
    """A message for stderr; the command exits 2 (a usage error)."""


def settings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The parser's settings by name (the flags' destinations)."""
    return {a.dest: a for a in parser._actions if a.dest not in NOT_SETTINGS and a.option_strings}


# where STREAMGLOBE_<NAME> already means something to a thin peer on the same machine (the
# directory of its saved offsets), the super-peer's variable is another
ENV_NAMES = {"state_dir": "STREAMGLOBE_SUPERPEER_STATE_DIR"}


def env_name(name: str) -> str:
    return ENV_NAMES.get(name, ENV_PREFIX + name.upper())


PeerSettings = Callable[[str, str], tuple[dict, str]]


def configure(parser: argparse.ArgumentParser, argv: Sequence[str], environ: dict[str, str] | None = None,
              peer_settings: PeerSettings | None = None) -> tuple[argparse.Namespace, dict[str, str]]:
    """Parse ``argv`` with the file's and the environment's settings as defaults: the settings,
    and per setting where its value came from. ``peer_settings(topology, id)``: the settings the
    topology gives this super-peer (its ``[superpeer.settings]`` table) and where they were
    written; they beat the file and lose to the environment."""
    environ = dict(os.environ if environ is None else environ)
    known = settings(parser)
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config", type=Path)
    config = early.parse_known_args(argv)[0].config
    merged: dict[str, object] = {}
    source: dict[str, str] = {}
    if config is not None:
        _layer(merged, source, known, _file(config), f"{config}", f"file {config}")
    if peer_settings is not None:  # the topology's settings for this super-peer (beat the file)
        early.add_argument("--topology")
        early.add_argument("--id")
        given = early.parse_known_args(argv)[0]
        spec = given.topology or environ.get(env_name("topology")) or merged.get("topology")
        peer = given.id or environ.get(env_name("id")) or merged.get("id")
        if spec and peer:
            found, where = peer_settings(str(spec), str(peer))
            for fixed in ("topology", "id"):
                if fixed in found:
                    raise ConfigError(f"{where}: '{fixed}' cannot be a super-peer's own setting")
            _layer(merged, source, known, found, where, where)
    for name, action in known.items():
        if env_name(name) in environ:
            merged[name] = _value(action, environ[env_name(name)], env_name(name))
            source[name] = f"environment {env_name(name)}"
    parser.set_defaults(**merged)
    for name in merged:  # (a required flag given by the file or the environment is not required)
        known[name].required = False
    args = parser.parse_args(argv)
    given = {a for a in argv if a.startswith("--")}
    for name, action in known.items():
        if any(arg == o or arg.startswith(o + "=") for o in action.option_strings for arg in given):
            source[name] = "command line"
        source.setdefault(name, "default")
    return args, source


def _layer(merged: dict, source: dict, known: dict[str, argparse.Action], values: dict, where: str,
           label: str) -> None:
    """One source's settings over the ones before it; a key that is not a setting is an error."""
    for key, value in values.items():
        name = key.replace("-", "_")
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{where}: unknown setting '{key}'{hint}; the settings are serve's flags: "
                              f"{', '.join(sorted(known))}")
        merged[name] = _value(known[name], value, f"{where}: {key}")
        source[name] = label


def _file(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"--config {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML: {exc}") from None


def _value(action: argparse.Action, value: object, where: str) -> object:
    """A file's or the environment's value, read as its flag would read it."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)):
        if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
            value = value.strip().lower() in TRUE
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {value!r} is not true or false")
        return value
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [v for v in str(value).split(",") if v.strip()]
        return [_one(action, v, where) for v in items]
    return _one(action, value, where)


def _one(action: argparse.Action, value: object, where: str) -> object:
    if isinstance(value, dict | list):
        raise ConfigError(f"{where}: expected one value, not a {type(value).__name__}")
    convert = action.type
    try:
        if convert in (int, float) and isinstance(value, int | float) and not isinstance(value, bool):
            value = convert(value)  # (a TOML number for a number setting)
        elif convert is not None:
            value = convert(value if isinstance(value, str) else str(value))
        elif not isinstance(value, str):
            raise ValueError("expected a string")
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise ConfigError(f"{where}: {value!r}: {exc}") from None
    if action.choices is not None and value not in action.choices:
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    return value


def print_config(args: argparse.Namespace, parser: argparse.ArgumentParser, source: dict[str, str]) -> str:
    """The settings in effect as TOML, each with where it came from (unset ones commented out)."""
    lines = ["# superpeer serve: the settings in effect (flag > environment > topology > --config file > default)"]
    for name in sorted(settings(parser)):
        value = getattr(args, name, None)
        where = source.get(name, "default")
        if value is None or value == []:
            lines.append(f"# {name} =  (not set; {env_name(name)})")
        else:
            lines.append(f"{name} = {_toml(value)}  # {where}" + ("" if where.startswith("environment")
                                                               else f" ({env_name(name)})"))
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if not isinstance(value, float) or math.isfinite(value) else json.dumps(str(value))
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))  # (a JSON string is a TOML basic string)
