"""The source article's plain-Python ``SlidingWindowSampler``, copied faithfully (only reformatted).

Source: ../shared/seeds/000_b71a8055b6fd44fd.txt, section 3.2. Used as the benchmark baseline and,
in tests, as an independent oracle for the *regular* starts. Its tail logic is not an oracle:
when the last regular window already ends at n it yields that window again (the duplicate the
article says it prevents), and with ``drop_short=True`` it never adds a tail window.
"""

from collections.abc import Iterator


class SlidingWindowSampler:
    def __init__(
        self,
        token_ids: list[int],
        window_size: int = 512,
        stride: int = 256,
        start_offset: int = 0,
        drop_short: bool = False,
    ):
        self.token_ids = token_ids
        self.window_size = window_size
        self.stride = stride
        self.start_offset = start_offset
        self.drop_short = drop_short
        self.total_len = len(token_ids)

    def __iter__(self) -> Iterator[tuple[int, list[int]]]:
        n = self.total_len
        if n < self.window_size:
            if self.drop_short:
                return
            yield 0, self.token_ids[:]
            return
        start = min(self.start_offset, max(n - self.window_size, 0))
        while start + self.window_size <= n:
            yield start, self.token_ids[start:start + self.window_size]
            start += self.stride
        # 保证最后一个窗口覆盖到文本尾部
        if start < n and not self.drop_short:
            tail_start = max(start, n - self.window_size)
            if tail_start + self.window_size > n and tail_start != start - self.stride:
                tail_start = n - self.window_size
            if tail_start >= 0 and tail_start + self.window_size <= n:
                yield tail_start, self.token_ids[tail_start:tail_start + self.window_size]
