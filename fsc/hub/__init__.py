"""The Hugging Face Hub: checkpoint directories (fsc.checkpoint) pushed and pulled.

names (repository ids, revisions, the pull directory; checked before any network call) ·
hub (the client's errors, the token, pull) · push (verify, then commit).
"""
