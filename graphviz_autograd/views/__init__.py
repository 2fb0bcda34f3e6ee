"""Views: what a picture or a page shows of a walked graph. Folding of repeated blocks,
module summaries, page fit, the split of shared leaves, junctions, stacking and
overlays, put together once by ``prepared.prepare`` into the ``View`` every front end
draws."""
