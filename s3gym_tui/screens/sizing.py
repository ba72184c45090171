"""Size classes (-narrow, -wide, ... from the breakpoints) put on a screen before it is mounted."""

from __future__ import annotations

from textual.app import App
from textual.screen import Screen


def breakpoint_classes(screen: Screen, app: App, width: int, height: int) -> dict[str, bool]:
    """The classes Textual's breakpoints give `screen` at this size (the same rule: the largest
    threshold not above the size wins; the screen's own breakpoints override the app's)."""
    horizontal = app.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is None \
        else screen.HORIZONTAL_BREAKPOINTS
    vertical = app.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is None else screen.VERTICAL_BREAKPOINTS
    classes: dict[str, bool] = {}
    for dimension, points in ((width, horizontal or []), (height, vertical or [])):
        chosen = next((name for at, name in sorted(points, reverse=True) if dimension >= at), None)
        for _, name in points:
            classes[name] = name == chosen
    return classes


def presize(screen: Screen, app: App) -> Screen:
    """Give `screen` its size classes now, so mounting it does not restyle every widget once more
    (a class change on a screen restyles all of its descendants)."""
    width, height = app.size
    if width and height and not screen.is_mounted:
        for name, on in breakpoint_classes(screen, app, width, height).items():
            screen.set_class(on, name, update=False)
    return screen


def refit(screen: Screen) -> bool:
    """Give a screen that comes back to the top the size classes of the terminal as it is now.
    Textual resizes only the top screen and the one right under it: a screen two levels down (Home
    under Pairs under Compare) kept the classes of the size it last saw. True when a class changed."""
    app = screen.app
    width, height = app.size
    if not (width and height):
        return False
    wanted = breakpoint_classes(screen, app, width, height)
    if all(screen.has_class(name) == on for name, on in wanted.items()):
        return False
    screen.update_classes(wanted, animate=False)
    return True
