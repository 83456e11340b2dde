"""The browser's screens over the panes: the help (F1, ?) and the call tree (f)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static, Tree

from .calls import TreeNode
from .keys import Key


class HelpScreen(ModalScreen[None]):
    """Every key of the browser, by group; any of Escape, q, F1 or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", show=False),
        Binding("q", "dismiss", show=False),
        Binding("f1", "dismiss", show=False),
        Binding("question_mark", "dismiss", show=False),
    ]

    def __init__(self, keys: Sequence[Key]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        group = None
        for key in self.keys:
            if key.group != group:
                group = key.group
                table.add_row("", "")
                table.add_row(f"[bold]{group}[/bold]", "")
            table.add_row(key.shown, key.help)
        with VerticalScroll() as scroll:
            scroll.border_title = "cputrace browse: keys (Escape closes)"
            yield Static(table)


class CallTreeScreen(ModalScreen[int | None]):
    """The calling contexts of the cursor's core as a tree, each with its calls and inclusive
    instructions and time; Enter on one gives the index of its first call's entry (the app
    goes there), Escape nothing."""

    DEFAULT_CSS = """
    CallTreeScreen { align: center middle; }
    CallTreeScreen > Tree { width: 90%; height: 90%; border: round $accent; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", show=False)]

    def __init__(self, nodes: Sequence[TreeNode]) -> None:
        super().__init__()
        self.nodes = nodes

    def compose(self) -> ComposeResult:
        tree: Tree[TreeNode] = Tree("calls", id="tree")
        tree.border_title = "Call tree: calls, inclusive instructions (and time); Enter opens a call"
        tree.show_root = False
        shown = {}
        for node in self.nodes:
            parent = shown.get(node.parent, tree.root)
            time = "" if node.time is None else f"  time {node.time:,}"
            label = f"{node.name}  calls {node.calls:,}  insns {node.insns:,}{time}"
            shown[node.id] = parent.add(label, data=node, expand=node.parent < 0 or len(self.nodes) < 200)
        yield tree

    def on_mount(self) -> None:
        self.query_one(Tree).focus()

    def on_tree_node_selected(self, event: Tree.NodeSelected[TreeNode]) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data.first_index)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
