"""Space-time diagrams of a ``Timeline``: what matches what (``matching``), the HTML page with its SVG
(``page``), Chrome's trace-event JSON (``chrome``) and writing them to disk within a budget (``files``)."""
