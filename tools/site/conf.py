"""Sphinx configuration of the course site (``python3 course.py html``).

The site is a Sphinx book: MyST-NB reads the notebooks with their stored outputs (nothing is
re-executed), the book theme gives the sidebar, search, page contents, the "Open in Colab" and
download buttons. ``tools/nbkit.py`` writes the source folder (student or instructor copies of
the notebooks and the home page) and calls Sphinx with this folder as its configuration folder;
the values that depend on the repository come in as ``-D`` overrides from there.
"""

project = "pe-lessons"
author = "the pe-lessons authors"
copyright = "the pe-lessons authors, MIT licence"
html_title = "pe-lessons: positional encoding in Transformers"

extensions = ["myst_nb", "sphinx.ext.mathjax"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
master_doc = "index"
language = "en"

# Notebooks are shown as stored: the outputs were made and checked by `python3 course.py execute`
# and nbval, and a site build must not need torch or time.
nb_execution_mode = "off"
# A chart is stored as Vega-Lite and as a PNG: the static page shows the PNG (Vega would need a CDN).
nb_mime_priority_overrides = [("html", "application/vnd.vegalite.v5+json", None)]
nb_ipywidgets_js = {}  # widgets are replaced by their stored static image: no widget JavaScript
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header"]

# Math: MathJax 2 as shipped by the jupyter-server-mathjax package, copied into _static/mathjax by
# nbkit, so formulas render with no network (a relative mathjax_path is relative to _static).
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
# MyST's own MathJax settings are for MathJax 3 (they would hide the pages from MathJax 2): off, and
# MathJax 2 typesets what Sphinx marks as math (class "math") and leaves code alone.
myst_update_mathjax = False
mathjax2_config = {
    # the copy ships one web font, STIX-Web: use it rather than look for TeX fonts it does not have
    "HTML-CSS": {"availableFonts": [], "preferredFont": None, "webFont": "STIX-Web", "imageFont": None},
    "tex2jax": {
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "processEscapes": False,
        "processClass": "math",
        "ignoreClass": "highlight|output|cell_input",
    },
    "showMathMenu": False,
}
# html_static_path: the source folder's _static (a -D override from nbkit)

html_theme = "sphinx_book_theme"
html_last_updated_fmt = None
html_copy_source = True  # the download button serves each page's notebook
html_theme_options = {
    # repository_url, repository_branch: -D overrides from nbkit (pyproject.toml is their one home)
    "path_to_docs": "notebooks",
    "use_repository_button": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "launch_buttons": {"colab_url": "https://colab.research.google.com", "notebook_interface": "jupyterlab"},
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "navigation_with_keys": False,
}
