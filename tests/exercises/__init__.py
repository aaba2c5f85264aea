"""Tests of the exercise checkers, one file per module of pe_lessons.exercises."""
