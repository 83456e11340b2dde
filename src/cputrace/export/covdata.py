"""What the coverage exporters share: the coverage of a request, with its listing written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.coverage import Coverage, compute_coverage, listing_beside
from ..errors import CputraceError
from .output import output_file

if TYPE_CHECKING:
    from .registry import ExportRequest


def coverage_of(request: ExportRequest) -> Coverage:
    """Coverage of the request's image by its window; writes OUTPUT.lst when code lacks lines."""
    if request.image is None:
        raise CputraceError("coverage reports need the program image: give --image PATH")
    listing = listing_beside(request.destination)
    coverage = compute_coverage(
        request.trace,
        request.image,
        image_name=request.destination.stem,
        window=request.window,
        listing=str(listing),
    )
    if coverage.listing:
        with output_file(listing, inputs=request.sources) as out:
            out.write(coverage.listing_text())
    return coverage
