"""The graph model: the walked backward graph as plain data (no torch), and the words
and colours each kind of node is drawn with."""
