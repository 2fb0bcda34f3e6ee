"""The explorer: one offline HTML page to browse a whole graph level by level
(Python builds its data and layouts; ``web/`` holds the page's own script and style)."""
