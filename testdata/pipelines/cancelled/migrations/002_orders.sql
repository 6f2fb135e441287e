CREATE TABLE orders (id integer PRIMARY KEY, user_id integer REFERENCES users (id));
