"""Drawing: a prepared view as DOT text, laid out by Graphviz or by the fixed layered
layout, rendered to files, or shown in a notebook."""
