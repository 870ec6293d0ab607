-- The orders participant.
CREATE TABLE IF NOT EXISTS orders (
  order_id text PRIMARY KEY,
  user_id bigint NOT NULL,
  item_id bigint NOT NULL,
  quantity int NOT NULL CHECK (quantity > 0),
  amount numeric(12, 2) NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
