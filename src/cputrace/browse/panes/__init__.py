"""The browser's panes: one Textual widget module per pane. They draw what the app gives them
and post messages for the moves they ask for; they never read the trace themselves."""
