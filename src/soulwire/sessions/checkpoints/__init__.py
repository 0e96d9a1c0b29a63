"""Checkpoints of a session's workspace: what the work dir (and `--add-dir` dirs) held at each
turn and step boundary, content-addressed and incremental, kept behind the session store
protocol beside the conversation. `book.CheckpointBook` is the one API every face uses."""
