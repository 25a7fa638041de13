"""The Hugging Face Hub: checkpoint directories (fsc.checkpoint) pushed and pulled.

names (repository ids, revisions, the pull directory; checked before any network call) ·
reach (a local path or a Hub id; whether the Hub can be reached, asked once) ·
hub (the client's errors, the token, pull) · push (verify, then commit).
"""
