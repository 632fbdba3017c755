"""`congestlab sensitivity`: a preset under every combination of plausible values of what
its seed leaves open, its distance to the published numbers, and its robust findings."""
