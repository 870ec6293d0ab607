-- The inventory participant: stock can never go below zero.
CREATE TABLE IF NOT EXISTS stock (
  item_id bigint PRIMARY KEY,
  qty int NOT NULL CHECK (qty >= 0)
);
