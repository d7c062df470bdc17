"""Text primitives shared by every layer: number formatting (``format``), markdown escaping
(``markdown``) and the generic rich tables of tool results (``tables``)."""
