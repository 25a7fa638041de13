"""Reading results back: figures (`fsc plot`), a self-contained report (`fsc report`) and the
comparison of two runs (`fsc compare`), all from the store."""
