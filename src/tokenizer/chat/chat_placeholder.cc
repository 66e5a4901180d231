// replaced by the chat work
