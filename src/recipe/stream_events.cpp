#include "recipe/stream_events.h"

namespace deepinfer::recipe {

std::unique_ptr<OutputSink> make_event_generator(Protocol protocol, EventOptions options,
                                                 EventSink& sink) {
  switch (protocol) {
    case Protocol::Responses:
      return std::make_unique<ResponsesEventGenerator>(std::move(options), sink);
    case Protocol::Messages:
      return std::make_unique<MessagesEventGenerator>(std::move(options), sink);
    case Protocol::ChatCompletions:
      break;
  }
  return std::make_unique<ChatEventGenerator>(std::move(options), sink);
}

}  // namespace deepinfer::recipe
