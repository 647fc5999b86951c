"""Framework adapters for ``permits`` (asyncio, trio, anyio).

They own the clock, the sleeping and their framework's cancellation, and
nothing of policy: every decision is :class:`permits.core.Machine`'s. The
adapters themselves are tracked in the project's issue 3; this package is the
place they live in, and holds nothing yet.
"""

__all__: list[str] = []
