"""What the product says of early ACR as a forecast of how a run ends, rendered from the lab sweep's fit file
(docs/evidence/sweep/fit.json ``preregistered``): README's sentence and docs/evidence/sweep.md's paragraph. They say
what the pre-registered confirmation says, whichever way it went, or that it has not yet run."""

from __future__ import annotations

from typing import Any

from lab.research import forecast_models as sm
from lab.research.lab_evidence import gain_text

FORECAST_BEGIN = "<!-- BEGIN FORECAST {name}: rendered by `python -m renderer` from {source} -->"
FORECAST_END = "<!-- END FORECAST {name} -->"
# What early ACR is added to, in a user's words.
KNOWN = "what a user already knows of a run (its learning rate, G and prompt mix, early reward, base accuracy)"


def confirmed_verdict(prereg: dict[str, Any]) -> str | None:
    """The confirmation's verdict in words (forecast_models.verdict_text), None until it has run at full budget."""
    if prereg["verdict"] == "pending":
        return None
    return sm.verdict_text(prereg["confirmation"]["table"]["decision"], KNOWN)


def readme_forecast(prereg: dict[str, Any]) -> str:
    """README's sentence: ACR counts wasted rollouts, and what the confirmation says of it as a forecast."""
    words, confirmation = confirmed_verdict(prereg), prereg["confirmation"]
    tail = ("(the forecast analysis is the lab's research, not part of the package: "
            "[docs/evidence/sweep.md](docs/evidence/sweep.md)).")
    if words is None:
        return ("ACR counts wasted rollouts; whether early ACR also foretells how a run ends is open: the lab's "
                "pre-registered confirmation sweep has not yet run, and its exploratory pass on the first sweep is a "
                f"lead, not a finding {tail}")
    use = ("a lead for runs like the lab's" if prereg["verdict"] == sm.ADDS
           else "so ACR is not sold as a forecast")
    return (f"ACR counts wasted rollouts. Whether early ACR also foretells how a run ends was put to a pre-registered "
            f"test on {confirmation['runs']} runs of the CPU lab (a tiny model on addition) from "
            f"{len(confirmation['bases'])} bases no fit had seen: {words}. Out-of-sample R^2 changed by "
            f"{gain_text(confirmation['table']['added']['acr'])}; {use} {tail}")


def sweep_forecast(prereg: dict[str, Any]) -> str:
    """docs/evidence/sweep.md's paragraph: what the product says, following the confirmation's verdict."""
    words = confirmed_verdict(prereg)
    packaged = "`avspo analyze` projects no final score from early ACR"
    common = ("The forecast analysis is the lab's research (lab/research/forecast_models.py), not part of the "
              "package; a line of early ACR alone supports a forecast only where "
              f"the pre-registered verdict is {sm.ADDS} (each fit file's `forecast` says why). The stagnation warning marks a run's wasted rollouts: within "
              "lr x base cells, runs where it fired did not end worse (block above). The old sweep's results, from the "
              "testbed where RL did not learn, are history: [sweep-history/](sweep-history/README.md).")
    if words is None:
        return ("**What the product says** until the confirmation has run: ACR is kept as what it certainly is, the "
                f"share of rollouts that taught nothing (`avspo/wasted_rollouts`). {packaged}: the pre-registered "
                "confirmation has not yet run, and the exploratory pass is labelled exploratory; it neither "
                f"calls ACR a forecast nor rules it out. {common}")
    return (f"**What the product says**, following the confirmation on bases no fit had seen: {words}. {packaged}; "
            "ACR is kept as what it certainly is, the share of rollouts that taught nothing (`avspo/wasted_rollouts`)"
            + (", and a forecast from it is one for runs like the lab's alone. " if prereg["verdict"] == sm.ADDS
               else ", never called a forecast. ") + common)
