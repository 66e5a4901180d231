// replaced by the tokenizer work
