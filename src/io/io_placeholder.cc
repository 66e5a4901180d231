// replaced by the io work
