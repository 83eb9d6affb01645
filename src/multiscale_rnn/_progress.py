"""Progress bars that suit where the output goes: a terminal, or a Jupyter notebook.

``tqdm.auto`` picks tqdm's notebook widget inside Jupyter, and when ipywidgets is missing warns
``IProgress not found`` before falling back to the text bar. Here the widget is used only when
ipywidgets is installed; otherwise the text bar is used from the start, which notebooks draw as well
(they honour the carriage returns), with no warning.
"""

import sys

__all__ = ["in_notebook", "bar_class"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (the output is shown by a notebook, which draws progress bars)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # pragma: no cover - an IPython too old or half imported
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def bar_class():
    """The tqdm class to draw with: in a notebook, the widget where ipywidgets is installed and the
    text bar otherwise; elsewhere ``tqdm.auto``'s (the text bar; tqdm.auto is not imported in a
    notebook, since importing it there without ipywidgets is what warns)."""
    if in_notebook():
        from tqdm.std import tqdm

        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as widget
        except ImportError:
            return tqdm
        return widget
    from tqdm.auto import tqdm as auto

    return auto
