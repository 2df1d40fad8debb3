"""The approvers' inbox: a local web page to review and decide pending VSH approvals."""

__all__ = ()
