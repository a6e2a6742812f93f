"""symkit.reps"""
