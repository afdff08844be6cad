#include "protocol.hpp"

namespace tessel::cluster {

Message Message::parse(std::string_view payload) {
  json body = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ProtocolError("message is not valid JSON");
  return Message(std::move(body));
}

Message::Message(json body) : body_(std::move(body)) {
  if (!body_.is_object()) throw ProtocolError("message is not a JSON object");
  const auto type = body_.find("type");
  if (type == body_.end() || !type->is_string()) throw ProtocolError("message has no string 'type'");
  type_ = type->get<std::string>();
}

Message Message::of(const json& element, std::string_view context) {
  if (!element.is_object()) throw ProtocolError(std::string(context) + " is not a JSON object");
  json body = element;
  body["type"] = std::string(context);
  return Message(std::move(body));
}

bool Message::has(std::string_view name) const {
  const auto it = body_.find(name);
  return it != body_.end() && !it->is_null();
}

const json& Message::field(std::string_view name) const {
  const auto it = body_.find(name);
  if (it == body_.end()) throw ProtocolError("'" + type_ + "' message lacks '" + std::string(name) + "'");
  return *it;
}

void Message::wrong(std::string_view name, std::string_view expected) const {
  throw ProtocolError("'" + std::string(name) + "' in '" + type_ + "' message must be " + std::string(expected));
}

std::string Message::text(std::string_view name) const {
  const json& value = field(name);
  if (!value.is_string()) wrong(name, "a string");
  return value.get<std::string>();
}

std::int64_t Message::integer(std::string_view name, std::int64_t min, std::int64_t max) const {
  const json& value = field(name);
  if (!value.is_number_integer()) wrong(name, "an integer");
  // Unsigned values beyond int64 are refused rather than wrapped.
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    wrong(name, "at most " + std::to_string(max));
  const auto v = value.get<std::int64_t>();
  if (v < min || v > max) wrong(name, "in " + std::to_string(min) + ".." + std::to_string(max));
  return v;
}

double Message::number(std::string_view name) const {
  const json& value = field(name);
  if (!value.is_number()) wrong(name, "a number");
  return value.get<double>();
}

bool Message::flag(std::string_view name) const {
  const json& value = field(name);
  if (!value.is_boolean()) wrong(name, "true or false");
  return value.get<bool>();
}

const json& Message::array(std::string_view name) const {
  const json& value = field(name);
  if (!value.is_array()) wrong(name, "an array");
  return value;
}

const json& Message::object(std::string_view name) const {
  const json& value = field(name);
  if (!value.is_object()) wrong(name, "an object");
  return value;
}

json message(std::string_view type, json fields) {
  fields["type"] = std::string(type);
  return fields;
}

}  // namespace tessel::cluster
