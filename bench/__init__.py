"""`make bench`: agentsite against bare LangGraph, side by side, in one run."""
