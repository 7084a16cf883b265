"""The one price table of the web room, and the rule that prices a call from it.

A provider's list price per request, in USD, with its source and the date it was read. The rule
(``call_cost``), as ``roma_lab.lm`` prices model calls: a call served from a recording reached no
provider and costs 0 now; a keyless self-hosted service, Wikipedia and the page reader send no bill
(0); a provider without a price here, and a failed call of a priced one (whether a provider bills
an error is not documented alike for all), cost unknown (None, NaN in tables), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["PRICES", "WebPrice", "call_cost"]


@dataclass(frozen=True, slots=True)
class WebPrice:
    """USD per request, covering up to ``included_results`` results (None: any number), and
    ``per_extra_result`` USD for each result asked beyond them."""

    per_request: float
    included_results: int | None = None
    per_extra_result: float = 0.0

    def of(self, results: int) -> float:
        extra = 0 if self.included_results is None else max(0, results - self.included_results)
        return self.per_request + extra * self.per_extra_result


PRICES: Mapping[str, WebPrice] = MappingProxyType({
    # $1.00 per 1k queries, the Starter pack (Standard $0.75, Scale $0.50, Ultimate $0.30): LiteLLM
    # 1.110.2's price list (serper/search), read 2026-12-06; serper.dev/pricing itself not re-read.
    "serper": WebPrice(0.001),
    # 1 credit per basic search, $0.008 per credit pay-as-you-go (plans $0.0075-0.005):
    # https://docs.tavily.com/documentation/api-credits, read 2026-12-06.
    "tavily": WebPrice(0.008),
    # $7 per 1k requests with up to 10 results and their highlights, $1 per 1k further results:
    # https://exa.ai/docs/reference/pricing and the 2026-03-03 changelog, read 2026-12-06.
    "exa": WebPrice(0.007, included_results=10, per_extra_result=0.001),
    # Search plan, $5.00 per 1k requests (with $5 of free credit a month): Brave's dashboard plans as
    # quoted by apidog.com/blog/brave-api-key (September 2026), read 2026-12-06.
    "brave": WebPrice(0.005),
    # Self-hosted metasearch, Wikimedia's free API and a plain GET of a page send no bill.
    "searxng": WebPrice(0.0),
    "wikipedia": WebPrice(0.0),
    "reader": WebPrice(0.0),
})


def call_cost(provider: str, *, results: int, replayed: bool, ok: bool) -> float | None:
    """What one call cost in USD: 0 when ``replayed``; the price of ``results`` asked when it
    succeeded; 0 for a free service either way; None (unknown) for an unpriced provider, and for a
    failed call of a priced one."""
    if replayed:
        return 0.0
    price = PRICES.get(provider)
    if price is None:
        return None
    if price.per_request == 0.0 and price.per_extra_result == 0.0:
        return 0.0
    return price.of(results) if ok else None
