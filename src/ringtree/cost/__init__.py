"""The cost interpreter: alpha-beta(-gamma) time of a schedule or of its closed form.

Nothing here imports torch: ``ringtree cost`` answers in milliseconds.
"""
