"""Objective variants for ``polymask compare``: a registered objective under a label, with options of its own,
so that settings of one objective (MLM with and without 80/10/10, two MAE-LM decoders) are compared side by side.

On the command line each ``--objectives`` argument is either plain names (``mlm``, ``mlm,maelm,exlm``) or one
variant ``[LABEL=]OBJECTIVE:KEY=VALUE[,KEY=VALUE...]`` (values read as YAML, as ``--set`` reads them):

    --objectives mlm mlm100=mlm:mask_prob=1.0,random_prob=0 maelm maelm:mask_prob=0.8,random_prob=0.1
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


from polymask.config import apply_override
from polymask.errors import ConfigError

LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass(frozen=True)
class Variant:
    """One compared setting: ``objective`` (a registered name) with ``options`` over the base recipe's, pretrained
    in ``<label>-seed<N>`` and reported as the row ``label``."""

    label: str
    objective: str
    options: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The objective and its own options, as a report names them."""
        given = ", ".join(f"{key}={value}" for key, value in self.options.items())
        return f"{self.objective} ({given})" if given else self.objective


def as_variant(value: Variant | str) -> Variant:
    """A variant as it is, or a registered objective's name as the variant of its defaults."""
    return value if isinstance(value, Variant) else Variant(value, value)


def _label(options: dict[str, Any], objective: str) -> str:
    return "-".join([objective, *(f"{key}{value}" for key, value in options.items())])


# a comma that starts the next KEY=VALUE (a comma inside a value, as in [1, 2], does not)
NEXT_OPTION = re.compile(r",(?=\s*[A-Za-z_][\w.]*\s*=)")


def _options(text: str, objective: str, assignments: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for assignment in filter(None, (part.strip() for part in NEXT_OPTION.split(assignments))):
        key = assignment.partition("=")[0].strip()
        if "=" not in assignment or key == "name":
            raise ConfigError(f"--objectives '{text}': '{assignment}' is not a KEY=VALUE option of {objective} "
                              f"(write [LABEL=]OBJECTIVE:KEY=VALUE,KEY=VALUE)")
        apply_override(options, assignment, where=f"--objectives '{text}': the value of {key}")
    return options


def _parse_one(text: str) -> Variant:
    head, _, assignments = text.partition(":")
    label, sep, objective = (part.strip() for part in head.partition("="))
    if not sep:
        label, objective = "", label
    if not objective or "=" in objective or "," in objective:
        raise ConfigError(f"--objectives '{text}': name one objective before the colon, one variant per argument "
                          f"([LABEL=]OBJECTIVE:KEY=VALUE,...)")
    options = _options(text, objective, assignments)
    label = label or _label(options, objective)
    if not LABEL.fullmatch(label):
        raise ConfigError(f"--objectives '{text}': label '{label}' must be letters, digits and . _ + - (it names "
                          f"the run folders); give one as LABEL={objective}:...")
    return Variant(label, objective, options)


def check_labels(variants: list[Variant]) -> None:
    """Refuse a label that names a registered objective but is not that objective with its defaults (it would be
    read, and made the baseline, as that objective)."""
    from polymask.objectives import OBJECTIVES

    for variant in variants:
        if variant.label in OBJECTIVES and (variant.label != variant.objective or variant.options):
            raise ConfigError(f"--objectives: the label '{variant.label}' names the objective {variant.label} with its "
                              f"defaults, not {variant.describe()}; give this variant another label")


def parse_variants(arguments: list[str]) -> list[Variant]:
    """The variants ``--objectives`` names, in order; a repeated label is an error (each run is pretrained once)."""
    variants = []
    for argument in arguments:
        if ":" in argument:
            variants.append(_parse_one(argument))
        else:
            variants += [_parse_one(name.strip()) for name in argument.split(",") if name.strip()]
    if not variants:
        raise ConfigError("--objectives names no objective; give names (mlm,maelm,exlm) or variants "
                          "(LABEL=OBJECTIVE:KEY=VALUE,...)")
    labels = [variant.label for variant in variants]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ConfigError(f"--objectives repeats {', '.join(repeated)}: each run is pretrained once; give each "
                          f"variant its own label (LABEL=OBJECTIVE:...)")
    return variants
