"""The lab's processes: `launcher` (several processes of a command on one
host) and `backends` (a command run again on the other Keras backend).

Imports nothing of the package.
"""
